// A real systemd user manager with its own D-Bus, in a private mount namespace (systemd --user
// refuses to start unless /run/systemd/system exists, which must not be created on the host).
// Each manager has its own XDG_RUNTIME_DIR and XDG_CONFIG_HOME, so managers never share units.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface UserSystemd {
  runtimeDir: string;
  configHome: string;
  /** Where this manager loads user units from: the agent's unit directory in tests. */
  unitDir: string;
  busAddress: string;
  env: NodeJS.ProcessEnv;
  systemctl(...args: string[]): { status: number | null; stdout: string; stderr: string };
  stop(): Promise<void>;
}

export function canRunUserSystemd(): boolean {
  return process.getuid?.() === 0 && existsSync('/lib/systemd/systemd') && spawnSync('unshare', ['--help']).status === 0;
}

/** `configHome`: where its units live (XDG_CONFIG_HOME), e.g. inside a sandboxed host's root. */
export async function startUserSystemd(options: { configHome?: string } = {}): Promise<UserSystemd> {
  const runtimeDir = mkdtempSync(join(tmpdir(), 'mcplane-xdg-run-'));
  const configHome = options.configHome ?? mkdtempSync(join(tmpdir(), 'mcplane-xdg-cfg-'));
  const unitDir = join(configHome, 'systemd', 'user');
  mkdirSync(unitDir, { recursive: true });
  const busAddress = `unix:path=${join(runtimeDir, 'bus')}`;
  const env = { ...process.env, XDG_RUNTIME_DIR: runtimeDir, XDG_CONFIG_HOME: configHome, DBUS_SESSION_BUS_ADDRESS: busAddress };
  const child: ChildProcess = spawn('unshare', ['-m', 'sh', '-c', 'mount -t tmpfs tmpfs /run/systemd && mkdir -p /run/systemd/system && exec /lib/systemd/systemd --user'], {
    env, stdio: 'ignore', detached: false,
  });
  const deadline = Date.now() + 10_000;
  const systemctl = (...args: string[]) => {
    const r = spawnSync('systemctl', ['--user', ...args], { env, encoding: 'utf8', timeout: 30_000 });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  while (!existsSync(join(runtimeDir, 'bus')) || systemctl('is-system-running').stdout.trim() === '') {
    if (Date.now() > deadline) throw new Error('systemd --user did not start within 10 s');
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    runtimeDir, configHome, unitDir, busAddress, env, systemctl,
    async stop() {
      systemctl('exit');
      const exited = new Promise((r) => child.once('exit', r));
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(timer);
    },
  };
}
