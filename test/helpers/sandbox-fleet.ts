// A control plane and the sandbox hosts one test starts, stopped after each test: the hosts
// first (their agents would otherwise log reconnects to a server that is gone), then the server.
// Tests that stop and restart the server mid-way assign fleet.server themselves.

import { afterEach } from 'node:test';
import type { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import type { TestServer } from './test-server.ts';

/** node:test's skip for tests whose hosts need a systemd user manager. */
export const skipWithoutUserSystemd = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';

export interface SandboxFleet {
  server: TestServer | undefined;
  /** Emptied in place after each test, so a test file may keep a reference to it. */
  readonly hosts: SandboxHost[];
}

/** Registers the afterEach that stops what the test started; call once at a test file's top level. */
export function sandboxFleetPerTest(): SandboxFleet {
  const fleet: SandboxFleet = { server: undefined, hosts: [] };
  afterEach(async () => {
    for (const h of fleet.hosts.splice(0)) await h.stop();
    await fleet.server?.close();
    fleet.server = undefined;
  });
  return fleet;
}
