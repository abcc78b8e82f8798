// Staging before the drain (issue 32): the OS content a node's next config needs (its OS image,
// the packages of a kernel type or an extension) is downloaded with rpm-ostree's --download-only
// while the node still runs its current config and serves. Nothing is deployed and nothing of the
// host changes; the update that follows applies with --cache-only (os-operations.ts), so the time
// the node spends drained is the apply and the reboot, not the download.
//
// It is its own component beside the update engine: the engine never waits for it, and a staging
// failure is not an update failure. The node stays Done on its config (available, schedulable);
// the failure is reported in NodeStatus.staging (Failed, naming the image and the cause) and the
// download is retried with backoff. The control plane gives the node its config only once it
// reports Staged for it.
//
// A disk check comes before any download and again right before the apply: the file system
// rpm-ostree writes to must keep staging.minFreeDisk free after the download (its size as the
// tool reports it, else the configured estimate).
//
// The pool's pinned image sets are part of what is staged: once the OS content is downloaded, a
// config is reported Staged only when every set the node was assigned is pulled (pinned-image-
// sets.ts pulls them on its own, at once), so the rollout drains the node only after its pinned
// images are on it. While they pull the staging says Staging, naming the sets and their counts;
// a set that fails makes the staging Failed with the set, its image and the reason (the node keeps
// serving on its config, the pool says it could not stage), and the puller's own retry settles it.

import { readFileSync, statfsSync } from 'node:fs';
import { join } from 'node:path';
import { InsufficientDiskError, UpdateStepError, type MachineConfigSpec, type StagingStatus } from '../machineconfig/index.ts';
import type { Logger } from '../runtime/logger.ts';
import type { StagingConfig } from './agent-config.ts';
import type { PinnedReadiness } from './pinned-image-sets.ts';
import { writeFileAtomic } from './durable-fs.ts';
import { osDownloadsFor, type OsDownloads } from './os-operations.ts';
import type { RpmOstree } from './rpm-ostree.ts';

/** Reports while a download runs: at most this often. */
const PROGRESS_REPORT_MS = 1000;

interface Persisted extends StagingStatus {
  downloads?: OsDownloads;
  attempt?: number;
  /** The OS content is downloaded (what, for the Staged reason); the pinned image sets may still be pulling. */
  downloaded?: string;
}

export class OsStaging {
  #status: Persisted | null;
  readonly #file: string;
  /** The config being staged; a newer stage request replaces it (the running download's result is then dropped). */
  #current: string | undefined;
  #retry: NodeJS.Timeout | undefined;
  #lastReport = 0;
  #stopped = false;

  private readonly rpm: RpmOstree;
  private readonly config: StagingConfig;
  private readonly log: Logger;
  /** Told on every change of the status (the agent reports it). */
  private readonly onChange: () => void;
  /**
   * Whether an update runs now: rpm-ostree runs one transaction at a time, and an update's
   * rpm-ostree step must not wait out a long download, so a download starts only between updates.
   */
  private readonly updateRunning: () => boolean;
  /** Whether the node's pinned image sets are pulled: a config is Staged only once they are. */
  private readonly pinned: () => PinnedReadiness;
  constructor(
    rpm: RpmOstree,
    config: StagingConfig,
    stateDir: string,
    log: Logger,
    onChange: () => void,
    updateRunning: () => boolean = () => false,
    pinned: () => PinnedReadiness = () => ({ ready: true }),
  ) {
    this.rpm = rpm;
    this.config = config;
    this.log = log;
    this.onChange = onChange;
    this.updateRunning = updateRunning;
    this.pinned = pinned;
    this.#file = join(stateDir, 'staging.json');
    this.#status = load(this.#file);
    // A download a restart cut short starts again (the cache keeps what it had fetched).
    if (this.#status && this.#status.state !== 'Staged') this.#current = undefined;
  }

  /** What the node reports in NodeStatus.staging. */
  status(): StagingStatus | null {
    if (!this.#status) return null;
    const { downloads: _d, attempt: _a, downloaded: _w, ...s } = this.#status;
    return s;
  }

  /**
   * Stage `config` (idempotent: the same config staging, staged or waiting for its retry is left
   * alone). A failed staging of the same config is retried on its backoff, not at every message.
   */
  stage(config: string, spec: MachineConfigSpec): void {
    if (this.#stopped) return;
    const s = this.#status;
    if (this.#current === config) return;
    if (s?.config === config && s.state === 'Staged') return;
    clearTimeout(this.#retry);
    this.#current = config;
    void this.#run(config, spec, s?.config === config ? (s.attempt ?? 0) : 0);
  }

  /** Whether the apply of `config` may go --cache-only: its content was staged. */
  cacheOnlyFor(config: string): boolean {
    return this.#status?.config === config && this.#status.state === 'Staged';
  }

  /**
   * The disk check right before the apply: with the content staged only the floor must hold;
   * otherwise the download the apply will make must fit too. Throws the apply step's error.
   */
  async checkBeforeApply(config: string, spec: MachineConfigSpec): Promise<void> {
    const downloads = await osDownloadsFor(this.rpm, spec).catch(() => ({ packages: [] }) as OsDownloads);
    if (!downloads.image && !downloads.packages.length) return;
    const needed = this.cacheOnlyFor(config) ? 0 : this.#estimate(downloads);
    try {
      this.#checkDisk(needed, this.cacheOnlyFor(config) ? `the apply of ${config} (content staged)` : `the apply of ${config} (${describe(downloads)}: ${needed} bytes to download)`);
    } catch (err) {
      throw new UpdateStepError('apply', 'disk', (err as Error).message);
    }
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retry);
  }

  /** The pinned image sets' status changed: a config whose OS content is downloaded may now be Staged (or Failed). */
  pinnedChanged(): void {
    this.#settlePinned();
  }

  /**
   * The OS content of the config being staged is downloaded: Staged once the pinned sets are
   * pulled, Failed (naming the set) while one fails, else Staging, waiting for them.
   */
  #settlePinned(): void {
    const s = this.#status;
    if (this.#stopped || !s?.downloaded || s.state === 'Staged' || this.#current !== s.config) return;
    const p = this.pinned();
    const base = { config: s.config, bytesDone: s.bytesDone, bytesTotal: s.bytesTotal, startedUnixMs: s.startedUnixMs, ...(s.downloads ? { downloads: s.downloads } : {}), downloaded: s.downloaded };
    if (p.ready) {
      this.#set({ ...base, state: 'Staged', reason: p.sets ? `${s.downloaded}; pinned image sets pulled (${p.sets})` : s.downloaded, endedUnixMs: Date.now() });
      this.#current = undefined;
      this.log.info({ config: s.config }, 'staging: staged, pinned image sets included; the update will apply from the cache');
      return;
    }
    const reason = p.failure ? `stage: pinned image sets: ${p.failure}` : `pinned image sets pulling: ${p.waiting}`;
    const state = p.failure ? 'Failed' : 'Staging';
    if (s.state === state && s.reason === reason) return;
    if (p.failure) this.log.warn({ config: s.config, reason: p.failure }, 'staging: a pinned image set failed; the node keeps serving on its config');
    this.#set({ ...base, state, reason, endedUnixMs: p.failure ? Date.now() : 0 });
  }

  async #run(config: string, spec: MachineConfigSpec, attempt: number): Promise<void> {
    while (this.updateRunning() && this.#current === config && !this.#stopped) await new Promise((r) => setTimeout(r, 1000).unref());
    if (this.#current !== config || this.#stopped) return;
    const started = Date.now();
    let downloads: OsDownloads;
    try {
      downloads = await osDownloadsFor(this.rpm, spec);
    } catch (err) {
      return this.#failed(config, spec, attempt, started, `stage: rpm-ostree status: ${(err as Error).message}`, undefined);
    }
    if (this.#current !== config) return;
    if (!downloads.image && !downloads.packages.length) {
      this.#set({ config, state: 'Staging', bytesDone: 0, bytesTotal: 0, reason: 'pinned image sets: checking', startedUnixMs: started, endedUnixMs: 0, downloads, downloaded: 'nothing to download' });
      return this.#settlePinned();
    }
    const estimate = this.#estimate(downloads);
    const what = describe(downloads);
    // Before anything is written: the download must fit above the floor.
    try {
      this.#checkDisk(estimate, `staging ${what}`);
    } catch (err) {
      if (!(err instanceof InsufficientDiskError)) throw err;
      return this.#failed(config, spec, attempt, started, `stage: ${what}: disk: ${err.message}`, downloads);
    }
    this.#set({ config, state: 'Staging', bytesDone: 0, bytesTotal: estimate, reason: `downloading ${what}`, startedUnixMs: started, endedUnixMs: 0, downloads, attempt });
    this.log.info({ config, image: downloads.image, packages: downloads.packages, estimateBytes: estimate }, 'staging: downloading ahead of the update');
    // Bytes of the finished parts, so the image's and the packages' progress add up.
    let before = 0;
    const progress = (done: number, total: number): void => {
      if (this.#current !== config || !this.#status) return;
      this.#status.bytesDone = before + done;
      if (total > 0) this.#status.bytesTotal = before + total;
      if (Date.now() - this.#lastReport >= PROGRESS_REPORT_MS) {
        this.#lastReport = Date.now();
        this.onChange();
      }
    };
    try {
      if (downloads.image) {
        await this.rpm.downloadImage(downloads.image, progress);
        before = this.#status?.bytesDone ?? 0;
      }
      if (downloads.packages.length) await this.rpm.downloadPackages(downloads.packages, progress);
    } catch (err) {
      return this.#failed(config, spec, attempt, started, `stage: ${what}: ${(err as Error).message}`, downloads);
    }
    if (this.#current !== config) return;
    const bytes = this.#status?.bytesDone ?? 0;
    this.log.info({ config, bytes, seconds: (Date.now() - started) / 1000 }, 'staging: downloaded');
    this.#set({ config, state: 'Staging', bytesDone: bytes, bytesTotal: Math.max(bytes, this.#status?.bytesTotal ?? 0), reason: 'pinned image sets: checking', startedUnixMs: started, endedUnixMs: 0, downloads, downloaded: `downloaded ${what}` });
    this.#settlePinned();
  }

  #failed(config: string, spec: MachineConfigSpec, attempt: number, started: number, reason: string, downloads: OsDownloads | undefined): void {
    if (this.#current !== config) return;
    const delay = Math.min(this.config.retrySeconds * 2 ** attempt, this.config.maxRetrySeconds) * 1000;
    const retry = `${reason}; retry ${attempt + 1} in ${Math.round(delay / 1000)}s`;
    this.log.warn({ config, reason, retryInMs: delay }, 'staging failed; the node keeps serving on its config');
    this.#set({ config, state: 'Failed', bytesDone: this.#status?.config === config ? this.#status.bytesDone : 0, bytesTotal: downloads ? this.#estimate(downloads) : 0, reason: retry, startedUnixMs: started, endedUnixMs: Date.now(), ...(downloads ? { downloads } : {}), attempt: attempt + 1 });
    this.#retry = setTimeout(() => {
      if (this.#current === config && !this.#stopped) void this.#run(config, spec, attempt + 1);
    }, delay);
    this.#retry.unref();
  }

  #estimate(d: OsDownloads): number {
    return (d.image ? this.config.imageSizes[d.image] ?? this.config.defaultImageSize : 0) + d.packages.length * this.config.packageSize;
  }

  /** Throws when `needed` bytes would take the file system under the floor. */
  #checkDisk(needed: number, what: string): void {
    let free: number;
    try {
      const s = statfsSync(this.config.fileSystem);
      free = Number(s.bavail) * Number(s.bsize);
    } catch (err) {
      throw new InsufficientDiskError(this.config.fileSystem, 0, needed + this.config.minFreeDisk, `${what} (the file system cannot be read: ${(err as Error).message})`);
    }
    if (free < needed + this.config.minFreeDisk) {
      throw new InsufficientDiskError(this.config.fileSystem, free, needed + this.config.minFreeDisk, `${what} (${needed} bytes) with staging.minFreeDisk (${this.config.minFreeDisk} bytes) kept free`);
    }
  }

  #set(s: Persisted): void {
    this.#status = s;
    try {
      writeFileAtomic(this.#file, JSON.stringify(s));
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'cannot keep the staging status on disk');
    }
    this.#lastReport = Date.now();
    this.onChange();
  }
}

function describe(d: OsDownloads): string {
  return [d.image ? `image ${d.image}` : '', d.packages.length ? `packages ${d.packages.join(', ')}` : ''].filter(Boolean).join(' and ');
}

function load(file: string): Persisted | null {
  try {
    const s = JSON.parse(readFileSync(file, 'utf8')) as Persisted;
    return s && typeof s.config === 'string' ? s : null;
  } catch {
    return null;
  }
}
