// Stops a service a test started (containerd, docker-registry): SIGTERM, SIGKILL after 10 s if it
// has not gone, then its directory removed, once it has exited so nothing writes there after.

import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';

export async function stopChild(child: ChildProcess, exited: Promise<void>, dir: string): Promise<void> {
  if (child.exitCode === null) {
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
  rmSync(dir, { recursive: true, force: true });
}
