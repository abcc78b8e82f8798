// A real systemd user manager with its own D-Bus, in a private mount namespace (systemd --user
// refuses to start unless /run/systemd/system exists, which must not be created on the host).
// Each manager has its own XDG_RUNTIME_DIR and XDG_CONFIG_HOME, so managers never share units,
// and a cgroup of its own (sandboxCgroup below), so they never share their units' cgroups either.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { scaled } from '../test/helpers/time-scale.ts';

export interface UserSystemd {
  runtimeDir: string;
  configHome: string;
  /** Where this manager loads user units from: the agent's unit directory in tests. */
  unitDir: string;
  busAddress: string;
  /**
   * The manager's own cgroup, one directory per mounted hierarchy systemd tracks processes in
   * (cgroup v2, or v1's name=systemd plus the unified one on a hybrid machine): its units' cgroups
   * are created below it. Removed by stop().
   */
  cgroupDirs: string[];
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
  const cgroupDirs = sandboxCgroup(`${process.pid}-${basename(runtimeDir).slice('mcplane-xdg-run-'.length)}`);
  let child: ChildProcess;
  let exited: Promise<unknown>;
  const launch = async () => {
    rmSync(join(runtimeDir, 'bus'), { force: true });
    // The shell moves itself into the manager's cgroup before it execs systemd (same pid), so the
    // manager finds itself there and creates its init.scope and units' slices below it. In the
    // machine's root cgroup, every manager created the same /app.slice/<unit>: stopping a unit on
    // one host killed the other hosts' processes of that unit. (A manager in the root cgroup also
    // moves every process of the root cgroup into its init.scope.)
    const script = 'for d in "$@"; do echo $$ > "$d/cgroup.procs" || exit 1; done; mount -t tmpfs tmpfs /run/systemd && mkdir -p /run/systemd/system && exec /lib/systemd/systemd --user';
    child = spawn('unshare', ['-m', 'sh', '-c', script, 'sh', ...cgroupDirs], {
      env, stdio: 'ignore', detached: false,
    });
    exited = new Promise((r) => child.once('exit', r));
    // 10 s on a quiet machine; it took longer beside other CPU work (test/helpers/time-scale.ts).
    const budget = scaled(10_000);
    const deadline = Date.now() + budget;
    while (!existsSync(join(runtimeDir, 'bus')) || systemctl('is-system-running').stdout.trim() === '') {
      // The manager may exit by itself (Ctrl-C reaches it too): say so rather than wait.
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`systemd --user exited while starting (${child.exitCode ?? child.signalCode})`);
      if (Date.now() > deadline) throw new Error(`systemd --user did not start within ${budget} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  try {
    await launch();
  } catch (err) {
    killCgroup(cgroupDirs);
    await removeCgroup(cgroupDirs);
    throw err;
  }
  return {
    runtimeDir, configHome, unitDir, busAddress, cgroupDirs, env, systemctl,
    async crash() {
      // The manager and everything it started, its bus daemon included: the bus goes with it.
      // Its cgroup holds all of them, those that left its process tree too.
      child.kill('SIGKILL');
      killCgroup(cgroupDirs);
      await exited;
      // A SIGKILL is delivered when its process next runs, which on a loaded machine is not at
      // once: a crash is over when the cgroup holds nothing (a process leaves it as it dies).
      await untilCgroupEmpty(cgroupDirs);
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
      if (child.exitCode !== null || child.signalCode !== null) {
        killCgroup(cgroupDirs);
        await removeCgroup(cgroupDirs);
        return;
      }
      // Asynchronous, so several managers stop side by side (a blocking `systemctl exit` made
      // three hosts stop one after another). A manager that no longer answers on its bus (Ctrl-C
      // reaches it too, and it may be exiting already) is killed with its tree after 2 s.
      const exit = spawn('systemctl', ['--user', 'exit'], { env, stdio: 'ignore' });
      exit.on('error', () => undefined);
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        killCgroup(cgroupDirs);
      }, 2000);
      await exited;
      clearTimeout(timer);
      if (exit.exitCode === null) exit.kill('SIGKILL');
      // Whatever outlived the manager (a unit it could not stop in time), then the cgroup itself.
      killCgroup(cgroupDirs);
      await removeCgroup(cgroupDirs);
    },
  };
}

/** Where the sandbox's managers get their cgroups, below each hierarchy's root. */
const SANDBOX_CGROUP = 'mcplane-sandbox';

/**
 * The hierarchies systemd tracks processes in, as mounted here: cgroup v2 at /sys/fs/cgroup; on a
 * hybrid machine v1's name=systemd at /sys/fs/cgroup/systemd (the one systemd 252 derives its own
 * cgroup from) and the unified one at /sys/fs/cgroup/unified.
 */
function cgroupRoots(): string[] {
  if (existsSync('/sys/fs/cgroup/cgroup.controllers')) return ['/sys/fs/cgroup'];
  const roots = ['/sys/fs/cgroup/systemd', '/sys/fs/cgroup/unified'].filter((d) => existsSync(join(d, 'cgroup.procs')));
  if (roots.length === 0) throw new Error('no cgroup hierarchy for systemd found under /sys/fs/cgroup: a sandbox systemd manager needs one of its own');
  return roots;
}

/**
 * Creates <root>/mcplane-sandbox/<id> in every hierarchy, first removing what managers of test
 * processes that no longer exist left behind (a run killed before its stop()).
 */
function sandboxCgroup(id: string): string[] {
  return cgroupRoots().map((root) => {
    const parent = join(root, SANDBOX_CGROUP);
    mkdirSync(parent, { recursive: true });
    for (const entry of readdirSync(parent)) {
      const owner = Number(entry.split('-')[0]);
      if (!Number.isInteger(owner) || owner <= 0 || pidAlive(owner)) continue;
      try { rmdirTree(join(parent, entry)); } catch { /* processes still in it: left alone */ }
    }
    const dir = join(parent, id);
    try {
      mkdirSync(dir);
    } catch (err) {
      throw new Error(`cannot create the sandbox manager's cgroup ${dir}: ${(err as Error).message}`);
    }
    return dir;
  });
}

function pidAlive(pid: number): boolean {
  try { process.kill(pid, 0); return true; } catch (err) { return (err as NodeJS.ErrnoException).code === 'EPERM'; }
}

/** Every process in the cgroup and below it. */
function cgroupPids(dir: string): number[] {
  const out: number[] = [];
  const walk = (d: string) => {
    try {
      for (const line of readFileSync(join(d, 'cgroup.procs'), 'utf8').split('\n')) if (line) out.push(Number(line));
      for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) walk(join(d, e.name));
    } catch { /* removed meanwhile */ }
  };
  walk(dir);
  return out;
}

function killCgroup(dirs: string[]): void {
  for (const pid of new Set(dirs.flatMap(cgroupPids))) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
}

/** Until no process is left in the cgroups (killing again what is), 10 s at most. */
async function untilCgroupEmpty(dirs: string[]): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (dirs.some((d) => cgroupPids(d).length > 0)) {
    if (Date.now() > deadline) throw new Error(`the sandbox manager's cgroup still holds ${dirs.flatMap(cgroupPids).join(', ')} 10 s after it was killed`);
    killCgroup(dirs);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** rmdir, children first (a cgroup directory holds only the kernel's files, removed with it). */
function rmdirTree(dir: string): void {
  for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) rmdirTree(join(dir, e.name));
  rmdirSync(dir);
}

/** Removes the cgroups once their killed processes are gone (EBUSY until then); 5 s at most. */
async function removeCgroup(dirs: string[]): Promise<void> {
  const deadline = Date.now() + 5000;
  for (const dir of dirs) {
    for (;;) {
      try {
        if (existsSync(dir) && statSync(dir).isDirectory()) rmdirTree(dir);
        break;
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`the sandbox manager's cgroup ${dir} still holds processes after 5 s: ${(err as Error).message}`);
        killCgroup([dir]);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }
}
