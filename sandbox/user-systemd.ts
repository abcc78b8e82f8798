// A real systemd user manager with its own D-Bus, in a private mount namespace (systemd --user
// refuses to start unless /run/systemd/system exists, which must not be created on the host).
// Each manager has its own XDG_RUNTIME_DIR and XDG_CONFIG_HOME, so managers never share units.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
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
  /** Kills the manager (and with it its bus) with SIGKILL, as a crash would. */
  crash(): Promise<void>;
  /** SIGSTOP / SIGCONT the manager: its bus stays up, but systemd answers nothing meanwhile. */
  freeze(): void;
  thaw(): void;
  /** Starts a manager again on the same runtime directory, bus address and units. */
  restart(): Promise<void>;
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
  const systemctl = (...args: string[]) => {
    const r = spawnSync('systemctl', ['--user', ...args], { env, encoding: 'utf8', timeout: 30_000 });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  let child: ChildProcess;
  let exited: Promise<unknown>;
  const launch = async () => {
    rmSync(join(runtimeDir, 'bus'), { force: true });
    child = spawn('unshare', ['-m', 'sh', '-c', 'mount -t tmpfs tmpfs /run/systemd && mkdir -p /run/systemd/system && exec /lib/systemd/systemd --user'], {
      env, stdio: 'ignore', detached: false,
    });
    exited = new Promise((r) => child.once('exit', r));
    const deadline = Date.now() + 10_000;
    while (!existsSync(join(runtimeDir, 'bus')) || systemctl('is-system-running').stdout.trim() === '') {
      // The manager may exit by itself (Ctrl-C reaches it too): say so rather than wait.
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`systemd --user exited while starting (${child.exitCode ?? child.signalCode})`);
      if (Date.now() > deadline) throw new Error('systemd --user did not start within 10 s');
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await launch();
  return {
    runtimeDir, configHome, unitDir, busAddress, env, systemctl,
    async crash() {
      // The manager and everything it started, its bus daemon included: the bus goes with it.
      const tree = descendants(child.pid!);
      child.kill('SIGKILL');
      for (const pid of tree) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
      await exited;
    },
    freeze() {
      child.kill('SIGSTOP');
    },
    thaw() {
      child.kill('SIGCONT');
    },
    async restart() {
      await launch();
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      // Asynchronous, so several managers stop side by side (a blocking `systemctl exit` made
      // three hosts stop one after another). A manager that no longer answers on its bus (Ctrl-C
      // reaches it too, and it may be exiting already) is killed with its tree after 2 s.
      const exit = spawn('systemctl', ['--user', 'exit'], { env, stdio: 'ignore' });
      exit.on('error', () => undefined);
      const timer = setTimeout(() => {
        const tree = descendants(child.pid!);
        child.kill('SIGKILL');
        for (const pid of tree) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
      }, 2000);
      await exited;
      clearTimeout(timer);
      if (exit.exitCode === null) exit.kill('SIGKILL');
    },
  };
}

/** Every process below `pid`, from /proc's parent links. */
function descendants(pid: number): number[] {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(ppid, [...(parents.get(ppid) ?? []), Number(entry)]);
    } catch { /* exited meanwhile */ }
  }
  const out: number[] = [];
  const walk = (p: number) => { for (const c of parents.get(p) ?? []) { out.push(c); walk(c); } };
  walk(pid);
  return out;
}
