// One simulated host, for the agent's tests and the demo: a temporary root laid out like CoreOS (/usr/local is a
// link into /var), a real systemd user manager for units, the rpm-ostree stand-in, a reboot
// stand-in, and the real mcplane-agent as a separate process. A "reboot" here is what it is to
// the agent: the process dies, the boot id changes, the staged deployment becomes the booted one.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { stringify } from 'yaml';
import type { TestPki } from '../test/helpers/test-pki.ts';
import { programArgs } from '../test/helpers/run-cli.ts';
import { scaled } from '../test/helpers/time-scale.ts';
import { startUserSystemd, type UserSystemd } from './user-systemd.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = join(HERE, '..');
export const STANDIN = join(HERE, 'stand-ins/rpm-ostree-standin.mjs');
export const REBOOT_STANDIN = join(HERE, 'stand-ins/reboot-standin.mjs');
/** Where the stand-ins keep what the kernel would provide (boot id, command line), under the root. */
const SANDBOX_RUN = 'run/mcplane-sandbox';

export interface HostOptions {
  name: string;
  server: string;
  /** Issues this host's node certificate (not needed when it enrolls from Ignition). */
  pki?: Pick<TestPki, 'node'>;
  /** The pool the host's credential binds it to (default worker). */
  pool?: string;
  labels?: Record<string, string>;
  /** Make /usr/local a real directory instead of CoreOS's link into /var. */
  usrLocalIsDirectory?: boolean;
  driftIntervalSeconds?: number;
  systemd?: UserSystemd;
  /** Settings merged over the generated agent config (timeouts, for instance). */
  config?: Record<string, unknown>;
  /**
   * The reboot fails while `rebootFailMarker` exists, as a reboot logind refuses; otherwise the
   * reboot stand-in reboots the host as usual.
   */
  failableReboot?: boolean;
  /** Run this instead of the agent from source, e.g. [node, 'dist/bundle/mcplane-agent.cjs']. */
  agentCommand?: string[];
}

export class SandboxHost {
  readonly dir: string;
  readonly root: string;
  readonly stateDir: string;
  readonly configPath: string;
  readonly bootIdFile: string;
  /** The booted kernel's command line, which the rpm-ostree stand-in keeps (the agent's /proc/cmdline). */
  readonly cmdlineFile: string;
  readonly rebootMarker: string;
  /** With failableReboot: while this file exists, every reboot the agent asks for fails. */
  readonly rebootFailMarker: string;
  readonly standinState: string;
  systemd!: UserSystemd;
  logs: string[] = [];
  reboots = 0;
  /** false: a reboot comes back on the old deployment, as when a staged one fails to boot. */
  bootStaged = true;
  #child: ChildProcess | undefined;
  #exited: Promise<number | null> | undefined;
  #ownSystemd = false;

  readonly options: HostOptions;
  constructor(options: HostOptions) {
    this.options = options;
    this.dir = mkdtempSync(join(tmpdir(), `mcplane-host-${options.name}-`));
    this.root = join(this.dir, 'root');
    this.stateDir = join(this.root, 'var/lib/mcplane');
    this.configPath = join(this.dir, 'agent.yaml');
    // Inside the root, so an agent started with --root finds it at /run/mcplane-sandbox/boot_id.
    this.bootIdFile = join(this.root, SANDBOX_RUN, 'boot_id');
    this.cmdlineFile = join(this.root, SANDBOX_RUN, 'cmdline');
    this.rebootMarker = join(this.dir, 'reboot-requested');
    this.rebootFailMarker = `${this.rebootMarker}.fail`;
    this.standinState = join(this.dir, 'rpm-ostree.json');
    for (const d of ['etc', 'var/usrlocal/bin', 'usr/bin', 'home/core/.ssh', 'opt-target', 'sysroot', SANDBOX_RUN]) mkdirSync(join(this.root, d), { recursive: true });
    if (options.usrLocalIsDirectory) mkdirSync(join(this.root, 'usr/local/bin'), { recursive: true });
    else symlinkSync('../var/usrlocal', join(this.root, 'usr/local'));
    writeFileSync(join(this.root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/home/core:/bin/bash\n');
    writeFileSync(join(this.root, 'etc/group'), 'root:x:0:\ncore:x:1000:\n');
    writeFileSync(join(this.root, 'etc/shadow'), 'root:*:19000:0:99999:7:::\ncore:*:19000:0:99999:7:::\n', { mode: 0o600 });
    writeFileSync(join(this.root, 'etc/gshadow'), 'root:*::\ncore:!::\n', { mode: 0o600 });
    writeFileSync(this.bootIdFile, randomUUID() + '\n');
    writeFileSync(join(this.dir, 'rpm-ostree'), `#!/bin/sh\nexec ${process.execPath} ${STANDIN} --standin-state ${this.standinState} --standin-cmdline ${this.cmdlineFile} "$@"\n`, { mode: 0o755 });
    spawnSync(join(this.dir, 'rpm-ostree'), ['standin-boot']); // the first boot: writes the command line
  }

  async start(env: NodeJS.ProcessEnv = {}): Promise<void> {
    if (!this.systemd) {
      this.systemd = this.options.systemd ?? await startUserSystemd();
      this.#ownSystemd = !this.options.systemd;
    }
    const certs = await this.options.pki!.node(this.options.name, this.options.pool);
    writeFileSync(this.configPath, stringify({
      server: this.options.server,
      tls: certs,
      nodeName: this.options.name,
      labels: this.options.labels ?? { 'node-role.kubernetes.io/worker': '' },
      paths: { root: this.root, unitDir: this.systemd.unitDir, stateDir: this.stateDir, bootIdFile: this.bootIdFile, kernelCmdlineFile: this.cmdlineFile },
      systemdBus: this.systemd.busAddress,
      rpmOstree: join(this.dir, 'rpm-ostree'),
      reboot: { method: 'command', command: this.#rebootCommand() },
      drift: { intervalSeconds: this.options.driftIntervalSeconds ?? 1 },
      heartbeatSeconds: 5,
      jobTimeoutSeconds: 20,
      // Several agents share this machine: each takes a free port and logs it ("metrics served").
      metrics: { listen: '127.0.0.1:0' },
      ...this.options.config,
    }));
    this.#env = env;
    this.spawnAgent(env);
  }

  #rebootCommand(): string[] {
    const reboot = [process.execPath, REBOOT_STANDIN, this.rebootMarker];
    if (!this.options.failableReboot) return reboot;
    return ['/bin/sh', '-c', 'test -e "$0" && exit 1; exec "$@"', this.rebootFailMarker, ...reboot];
  }

  /**
   * Starts the agent the way a bootstrapped host does: from <root>/etc/mcplane/agent.yaml as
   * Ignition wrote it, with only this test environment's settings added as a drop-in.
   */
  async startFromRoot(): Promise<void> {
    if (!this.systemd) {
      // Its units live in <root>/etc/systemd/user, so the agent's unit directory is a host path.
      this.systemd = this.options.systemd ?? await startUserSystemd({ configHome: join(this.root, 'etc') });
      this.#ownSystemd = !this.options.systemd;
    }
    const unitDir = this.hostPath(this.systemd.unitDir);
    mkdirSync(join(this.root, 'etc/mcplane/agent.yaml.d'), { recursive: true });
    // Every path here is a host path: --root puts it under the root.
    writeFileSync(join(this.root, 'etc/mcplane/agent.yaml.d/99-test-environment.yaml'), stringify({
      nodeName: this.options.name,
      paths: { unitDir, bootIdFile: this.hostPath(this.bootIdFile), kernelCmdlineFile: this.hostPath(this.cmdlineFile) },
      systemdBus: this.systemd.busAddress,
      rpmOstree: join(this.dir, 'rpm-ostree'),
      reboot: { method: 'command', command: [process.execPath, REBOOT_STANDIN, this.rebootMarker] },
      drift: { intervalSeconds: 1 },
      metrics: { listen: '127.0.0.1:0' },
    }));
    this.#rootMode = true;
    this.spawnAgent();
  }

  #rootMode = false;
  /** The agent's environment, kept across reboots as a unit's Environment= is. */
  #env: NodeJS.ProcessEnv = {};

  /** A path inside the root as the host sees it ("/etc/..."); throws for one outside. */
  hostPath(path: string): string {
    if (!path.startsWith(this.root + '/')) throw new Error(`${path} is outside the sandbox root ${this.root}; a --root agent cannot reach it`);
    return path.slice(this.root.length);
  }

  spawnAgent(env: NodeJS.ProcessEnv = this.#env): void {
    const [program, ...args] = this.options.agentCommand ?? [process.execPath, ...programArgs('mcplane-agent')];
    const child = spawn(program!, [...args, ...(this.#rootMode ? ['--root', this.root] : ['--config', this.configPath])], {
      cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? -1 : null))));
    createInterface({ input: child.stdout! }).on('line', (l) => this.logs.push(l));
    createInterface({ input: child.stderr! }).on('line', (l) => this.logs.push(`stderr: ${l}`));
  }

  /** The agent's /metrics URL, from its "metrics served" log line (the latest process's). */
  metricsUrl(): string | undefined {
    for (let i = this.logs.length - 1; i >= 0; i--) {
      const m = /"metrics":"(http:[^"]+)".*metrics served/.exec(this.logs[i]!);
      if (m) return m[1];
    }
    return undefined;
  }

  get alive(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** Waits for the agent process to exit by itself (a failpoint killed it). */
  async exited(quietTimeoutMs = 20_000): Promise<number | null> {
    const timeoutMs = scaled(quietTimeoutMs);
    const timer = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), timeoutMs));
    const result = await Promise.race([this.#exited!, timer]);
    if (result === 'timeout') throw new Error(`agent ${this.options.name} did not exit within ${timeoutMs} ms\n${this.logs.slice(-20).join('\n')}`);
    return result;
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.alive) {
      this.#child!.kill(signal);
      await this.#exited;
    }
  }

  /** Performs a requested reboot: new boot id, staged deployment booted, agent restarted. */
  async rebootIfRequested(): Promise<boolean> {
    if (!existsSync(this.rebootMarker)) return false;
    const requests = readFileSync(this.rebootMarker, 'utf8').trim().split('\n').length;
    if (requests <= this.reboots) return false;
    this.reboots = requests;
    await this.kill();
    writeFileSync(this.bootIdFile, randomUUID() + '\n');
    if (this.bootStaged) spawnSync(join(this.dir, 'rpm-ostree'), ['standin-boot']);
    this.spawnAgent();
    return true;
  }

  rpmOstree(...args: string[]): string {
    return spawnSync(join(this.dir, 'rpm-ostree'), args, { encoding: 'utf8' }).stdout;
  }

  file(path: string): string | undefined {
    try {
      return readFileSync(join(this.root, path), 'utf8');
    } catch {
      return undefined;
    }
  }

  /**
   * Stops the host as a shutdown would: the agent gets SIGTERM and, like a unit past its
   * TimeoutStopSec=, SIGKILL after `graceMs`. Without the bound an agent that waits for an update
   * to finish (it does, on SIGTERM) could wait out a D-Bus call's 25 s deadline when Ctrl-C has
   * stopped its systemd too; the journal makes the kill safe, as on a real host.
   */
  async stop(graceMs = 1500): Promise<void> {
    if (this.alive) {
      const timer = setTimeout(() => this.#child?.kill('SIGKILL'), graceMs);
      await this.kill('SIGTERM');
      clearTimeout(timer);
    }
    if (this.#ownSystemd) await this.systemd.stop();
  }
}
