// rpm-ostree through its command line (--json where it has it), as MCO, Zincati and Flight
// Control drive it. A busy daemon (another transaction running) is retried with backoff and
// logged; it is not a failure of the update.

import { execFile, spawn } from 'node:child_process';
import { RpmOstreeError, splitKernelArguments, type OsStatus } from '../machineconfig/index.ts';
import type { Logger } from '../runtime/logger.ts';
import { configurableArgs, type Cmdline } from './kernel-cmdline.ts';

export interface Deployment {
  booted: boolean;
  staged: boolean;
  checksum: string;
  'container-image-reference'?: string;
  'requested-packages'?: string[];
  'requested-base-removals'?: string[];
}

export interface OstreeStatus {
  booted: Deployment;
  staged: Deployment | undefined;
  /**
   * rpm-ostree's pending deployment, which the next boot uses and every change builds on: the
   * staged one, or the first in boot order when that is not the booted one (after a rollback);
   * undefined when the booted one boots next.
   */
  pending: Deployment | undefined;
}

/** MCO's kernel packages per kernel type (pkg/daemon/update.go). */
export const KERNEL_PACKAGES = {
  default: ['kernel', 'kernel-core', 'kernel-modules', 'kernel-modules-core', 'kernel-modules-extra'],
  realtime: ['kernel-rt-core', 'kernel-rt-modules', 'kernel-rt-modules-extra', 'kernel-rt-kvm'],
  '64k-pages': ['kernel-64k-core', 'kernel-64k-modules', 'kernel-64k-modules-core', 'kernel-64k-modules-extra'],
} as const;

/** MCO's extension to package mapping (pkg/daemon/update.go getSupportedExtensions). */
export const EXTENSION_PACKAGES: Record<string, string[]> = {
  'two-node-ha': ['pacemaker', 'pcs', 'fence-agents-all'],
  ipsec: ['NetworkManager-libreswan', 'libreswan'],
  usbguard: ['usbguard'],
  kerberos: ['krb5-workstation', 'libkadm5'],
  'kernel-devel': ['kernel-devel', 'kernel-headers'],
  'sandboxed-containers': ['kata-containers'],
  sysstat: ['sysstat'],
};

const BUSY = /transaction in progress|already in progress|busy/i;

/**
 * The line of a failed command's stderr that says what went wrong: rpm-ostree's own
 * `error: ...`, else an exception's `SomethingError: ...` (a crashed script's trace starts
 * with a source location, which said nothing in a node's Degraded reason), else the first line.
 */
export function failureLine(stderr: string): string {
  const lines = stderr.split('\n').map((l) => l.trim()).filter(Boolean);
  return lines.find((l) => /^error:/i.test(l)) ?? lines.find((l) => /^[A-Za-z]*Error\b/.test(l)) ?? lines[0] ?? '';
}

export class RpmOstree {
  private readonly binary: string;
  private readonly log: Logger;
  /** Told about every busy retry, so the node's status can say why it waits. */
  private readonly onBusy: (attempt: number, retryInMs: number) => void;
  private readonly retry: { attempts: number; firstDelayMs: number; maxDelayMs: number };
  private readonly timeoutMs: number;
  constructor(
    binary: string,
    log: Logger,
    onBusy: (attempt: number, retryInMs: number) => void = () => undefined,
    retry: { attempts: number; firstDelayMs: number; maxDelayMs: number } = { attempts: 8, firstDelayMs: 500, maxDelayMs: 15_000 },
    timeoutMs: number = 30 * 60_000,
  ) {
    this.binary = binary;
    this.log = log;
    this.onBusy = onBusy;
    this.retry = retry;
    this.timeoutMs = timeoutMs;
  }

  async status(): Promise<OstreeStatus> {
    const out = await this.run(['status', '--json']);
    let parsed: { deployments?: Deployment[] };
    try {
      parsed = JSON.parse(out);
    } catch (err) {
      throw new RpmOstreeError(`rpm-ostree status --json printed something that is not JSON: ${(err as Error).message}`);
    }
    const booted = parsed.deployments?.find((d) => d.booted);
    if (!booted) throw new RpmOstreeError('rpm-ostree status --json lists no booted deployment');
    const staged = parsed.deployments?.find((d) => d.staged);
    const first = parsed.deployments?.[0];
    return { booted, staged, pending: staged ?? (first && !first.booted ? first : undefined) };
  }

  /**
   * Kernel arguments of the default deployment (the pending one, else the booted one): what
   * `rpm-ostree kargs` prints, and what `rpm-ostree kargs --append/--delete` change. What the kernel booted with is /proc/cmdline (kernel-cmdline.ts).
   */
  async kargs(): Promise<string[]> {
    return splitKernelArguments([(await this.run(['kargs'])).trim()]);
  }

  async changeKargs(remove: string[], add: string[]): Promise<void> {
    if (!remove.length && !add.length) return;
    await this.run(['kargs', ...remove.map((k) => `--delete-if-present=${k}`), ...add.map((k) => `--append-if-missing=${k}`)]);
  }

  /** `cacheOnly`: -C, from what a download-only run put in the cache (os-staging.ts); nothing is fetched. */
  async setKernelType(from: keyof typeof KERNEL_PACKAGES, to: keyof typeof KERNEL_PACKAGES, cacheOnly = false): Promise<void> {
    if (from === to) return;
    const c = cacheOnly ? ['-C'] : [];
    if (to === 'default') {
      await this.run(['override', 'reset', ...KERNEL_PACKAGES.default, ...KERNEL_PACKAGES[from].flatMap((p) => ['--uninstall', p]), ...c]);
    } else if (from === 'default') {
      await this.run(['override', 'remove', ...KERNEL_PACKAGES.default, ...KERNEL_PACKAGES[to].flatMap((p) => ['--install', p]), ...c]);
    } else {
      await this.run(['override', 'remove', ...KERNEL_PACKAGES.default, ...KERNEL_PACKAGES[from].flatMap((p) => ['--uninstall', p]), ...KERNEL_PACKAGES[to].flatMap((p) => ['--install', p]), ...c]);
    }
  }

  async changeExtensions(remove: string[], add: string[], cacheOnly = false): Promise<void> {
    const uninstall = remove.flatMap((e) => EXTENSION_PACKAGES[e] ?? []);
    const install = add.flatMap((e) => EXTENSION_PACKAGES[e] ?? []);
    if (!uninstall.length && !install.length) return;
    await this.run(['update', ...install.flatMap((p) => ['--install', p]), ...uninstall.flatMap((p) => ['--uninstall', p]), ...(cacheOnly ? ['-C'] : [])]);
  }

  async rebase(image: string, cacheOnly = false): Promise<void> {
    await this.run(['rebase', '--experimental', `ostree-unverified-registry:${image}`, ...(cacheOnly ? ['-C'] : [])]);
  }

  /**
   * rpm-ostree's --download-only: the image (rebase) or the packages (update --install) into
   * the local cache, nothing deployed. `onProgress` hears each "DONE/TOTAL bytes" the tool
   * prints. No busy retry here: staging retries the whole download with its own backoff.
   */
  downloadImage(image: string, onProgress: (done: number, total: number) => void): Promise<void> {
    return this.#stream(['rebase', '--experimental', '--download-only', `ostree-unverified-registry:${image}`], onProgress);
  }

  downloadPackages(packages: string[], onProgress: (done: number, total: number) => void): Promise<void> {
    return this.#stream(['update', '--download-only', ...packages.flatMap((p) => ['--install', p])], onProgress);
  }

  #stream(args: string[], onProgress: (done: number, total: number) => void): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      let partial = '';
      const timer = setTimeout(() => child.kill('SIGKILL'), this.timeoutMs);
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) {
          const m = /(\d+)\s*\/\s*(\d+)\s*bytes/.exec(line);
          if (m) onProgress(Number(m[1]), Number(m[2]));
        }
      });
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => { if (stderr.length < 64 * 1024) stderr += chunk; });
      child.once('error', (err) => {
        clearTimeout(timer);
        reject(new RpmOstreeError(`rpm-ostree ${args.join(' ')}: ${err.message}`));
      });
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        if (code === 0) return resolve();
        const detail = signal === 'SIGKILL' ? `did not finish within ${this.timeoutMs / 1000}s; killed` : failureLine(stderr) || `exited with ${code ?? signal}`;
        reject(new RpmOstreeError(`rpm-ostree ${args.join(' ')}: ${detail}`, BUSY.test(stderr)));
      });
    });
  }

  /** What the node reports as its OS status; kernel arguments as the kernel booted with them. */
  async osStatus(cmdline: Cmdline): Promise<OsStatus> {
    const { booted, staged } = await this.status();
    if (!cmdline.ok) this.log.warn({ reason: cmdline.reason }, 'cannot report the booted kernel arguments');
    const kernelArguments = cmdline.ok ? configurableArgs(cmdline.args) : [];
    return {
      bootedImage: imageOf(booted),
      bootedChecksum: booted.checksum,
      kernelArguments,
      kernelType: kernelTypeOf(booted),
      extensions: extensionsOf(booted),
      stagedImage: staged ? imageOf(staged) : '',
      fips: kernelArguments.includes('fips=1'),
    };
  }

  async run(args: string[]): Promise<string> {
    let delay = this.retry.firstDelayMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await new Promise<string>((resolve, reject) => {
          execFile(this.binary, args, { timeout: this.timeoutMs, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
            if (!err) return resolve(stdout);
            const killed = (err as { killed?: boolean }).killed;
            const detail = killed ? `did not finish within ${this.timeoutMs / 1000}s; killed` : failureLine(stderr || err.message);
            reject(new RpmOstreeError(`rpm-ostree ${args.join(' ')}: ${detail}`, BUSY.test(stderr)));
          });
        });
      } catch (err) {
        if (!(err instanceof RpmOstreeError) || !err.busy || attempt >= this.retry.attempts) throw err;
        const wait = Math.round(delay * (0.75 + Math.random() / 2));
        this.log.warn({ attempt, retryInMs: wait, command: args[0] }, 'rpm-ostree is busy with another transaction; retrying');
        this.onBusy(attempt, wait);
        await new Promise((r) => setTimeout(r, wait));
        delay = Math.min(delay * 2, this.retry.maxDelayMs);
      }
    }
  }
}

export function imageOf(d: Deployment): string {
  return (d['container-image-reference'] ?? '').replace(/^ostree-[a-z-]+:/, '');
}

export function kernelTypeOf(d: Deployment): keyof typeof KERNEL_PACKAGES {
  const pkgs = d['requested-packages'] ?? [];
  if (pkgs.includes('kernel-rt-core')) return 'realtime';
  if (pkgs.includes('kernel-64k-core')) return '64k-pages';
  return 'default';
}

export function extensionsOf(d: Deployment): string[] {
  const pkgs = new Set(d['requested-packages'] ?? []);
  return Object.entries(EXTENSION_PACKAGES).filter(([, p]) => p.every((x) => pkgs.has(x))).map(([e]) => e).sort();
}
