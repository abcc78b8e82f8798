// Notices managed files changed behind the agent's back: fs.watch (inotify) on each directory
// that holds managed files, for a report within moments, plus a periodic full comparison for what
// a watch can miss (a directory replaced, an event dropped under load, unit enablement).

import { readFileSync, statSync, watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import type { Drift } from '../machineconfig/index.ts';
import type { Logger } from '../runtime/logger.ts';
import { sha256 } from './desired-files.ts';
import type { DesiredFile } from './file-transaction.ts';

const SETTLE_MS = 100;

export class DriftMonitor {
  #expected = new Map<string, DesiredFile & { hash: string }>();
  #watchers: FSWatcher[] = [];
  #timer: NodeJS.Timeout | undefined;
  #pending = new Set<string>();
  #settle: NodeJS.Timeout | undefined;
  #extraChecks: () => Promise<Drift[]> = async () => [];
  #known = new Map<string, Drift>();
  /** A drift entry's path (as the config names it) to the file on this host. */
  #hostPaths = new Map<string, string>();
  #recheck: NodeJS.Timeout | undefined;

  private readonly log: Logger;
  private readonly intervalMs: number;
  private readonly onDrift: (drift: Drift[]) => void;
  constructor(
    log: Logger,
    intervalMs: number,
    onDrift: (drift: Drift[]) => void,
  ) {
    this.log = log;
    this.intervalMs = intervalMs;
    this.onDrift = onDrift;
  }

  /** Starts watching these files (replacing any earlier set). */
  watch(files: DesiredFile[], extraChecks?: () => Promise<Drift[]>): void {
    this.stop();
    this.#known.clear();
    for (const f of files) {
      this.#expected.set(f.hostPath, { ...f, hash: sha256(f.bytes) });
      this.#hostPaths.set(reportedPath(f), f.hostPath);
    }
    if (extraChecks) this.#extraChecks = extraChecks;
    for (const dir of new Set(files.map((f) => dirname(f.hostPath)))) {
      try {
        const w = watch(dir, { persistent: false }, (_event, name) => {
          const path = name ? `${dir}/${name}` : undefined;
          if (path && this.#expected.has(path)) this.#queue(path);
          else if (!name) for (const p of this.#expected.keys()) if (dirname(p) === dir) this.#queue(p);
        });
        w.on('error', () => undefined); // the directory went away: the periodic check reports it
        this.#watchers.push(w);
      } catch {
        // Missing directory: the periodic check reports the files as missing.
      }
    }
    this.#timer = setInterval(() => void this.checkAll(), this.intervalMs);
    this.#timer.unref();
    // Anything changed between writing the files and starting the watch is caught now.
    void this.checkAll();
  }

  stop(): void {
    for (const w of this.#watchers) w.close();
    this.#watchers = [];
    clearInterval(this.#timer);
    clearTimeout(this.#settle);
    clearTimeout(this.#recheck);
    this.#settle = undefined;
    this.#timer = undefined;
    this.#expected.clear();
    this.#hostPaths.clear();
    this.#pending.clear();
  }

  /** The file on this host behind a drift entry's path, while it is watched. */
  hostPathOf(path: string): string | undefined {
    return this.#hostPaths.get(path);
  }

  /**
   * Compares everything again in `ms` and reports all it finds, new or not: a rewrite that
   * waited out its backoff (drift-reconciler.ts) acts on what is there then.
   */
  recheckIn(ms: number): void {
    clearTimeout(this.#recheck);
    this.#recheck = setTimeout(() => {
      this.#recheck = undefined;
      if (this.#expected.size === 0) return; // stopped meanwhile (an update runs)
      this.#known.clear();
      // Nothing left (the file was put back meanwhile) is worth saying too.
      void this.checkAll().then((found) => { if (found.length === 0) this.onDrift([]); });
    }, ms);
    this.#recheck.unref();
  }

  /** Compares every managed file (and the extra checks) now; reports if anything is new. */
  async checkAll(): Promise<Drift[]> {
    const found: Drift[] = [];
    for (const f of this.#expected.values()) {
      const d = this.#compare(f);
      if (d) found.push(d);
    }
    found.push(...(await this.#extraChecks().catch(() => [])));
    this.#publish(found, true);
    return found;
  }

  #queue(path: string): void {
    this.#pending.add(path);
    this.#settle ??= setTimeout(() => {
      this.#settle = undefined;
      const found: Drift[] = [];
      for (const p of this.#pending) {
        const f = this.#expected.get(p);
        const d = f && this.#compare(f);
        if (d) found.push(d);
      }
      this.#pending.clear();
      this.#publish(found, false);
    }, SETTLE_MS);
  }

  #compare(f: DesiredFile & { hash: string }): Drift | undefined {
    let expected = f.hash;
    let actual = '';
    try {
      const st = statSync(f.hostPath);
      const mode = st.mode & 0o7777;
      // A file others may not read (by the config or on disk) keeps its hashes here: a
      // truncated sha256 in a metric, a log or the node's status confirms a guessed secret.
      const secret = !worldReadable(f.mode) || !worldReadable(mode);
      if (secret) expected = withheld(f.mode);
      if (mode !== f.mode) {
        actual = `mode 0${mode.toString(8)}`;
      } else {
        const bytes = readFileSync(f.hostPath);
        if (bytes.equals(f.bytes)) return undefined;
        actual = secret ? withheld(mode) : sha256(bytes);
      }
    } catch {
      // Missing (or unreadable): nothing of the content is known, the config's hash is all.
      if (!worldReadable(f.mode)) expected = withheld(f.mode);
      actual = '';
    }
    return { path: reportedPath(f), kind: f.object.startsWith('unit') || f.object.startsWith('dropin') ? 'unit' : 'file', expectedHash: expected, actualHash: actual, detectedUnixMs: Date.now() };
  }

  #publish(found: Drift[], full: boolean): void {
    // A file changed again (another hash) is news too: Adopt reports the new content.
    const fresh = found.filter((d) => this.#known.get(d.path)?.actualHash !== d.actualHash || !this.#known.has(d.path));
    for (const d of found) this.#known.set(d.path, d);
    let gone = 0;
    if (full) {
      for (const path of [...this.#known.keys()]) {
        if (!found.some((d) => d.path === path)) {
          this.#known.delete(path);
          gone++;
        }
      }
    }
    // Drift that went away (a file put back by hand) is reported too, as what remains.
    if (!fresh.length && gone) this.onDrift([...this.#known.values()]);
    if (fresh.length) {
      this.log.warn({ drift: fresh.map((d) => ({ path: d.path, expected: d.expectedHash.slice(0, 16), actual: d.actualHash.slice(0, 16) || 'missing' })) }, 'managed files changed outside the agent');
      this.onDrift([...this.#known.values()]);
    }
  }
}

/** The path a drift entry names: the config's for a file, the file on the host for a unit's. */
function reportedPath(f: DesiredFile): string {
  return f.object.startsWith('file ') ? f.object.slice(5) : f.hostPath;
}

/** The path driftIgnore matches: the config's for a file, /etc/systemd/system's for a unit's files. */
export function ignorePath(f: DesiredFile): string {
  if (f.object.startsWith('unit ')) return `/etc/systemd/system/${f.object.slice(5)}`;
  if (f.object.startsWith('dropin ')) {
    const [unit, dropin] = f.object.slice(7).split('/');
    return `/etc/systemd/system/${unit}.d/${dropin}`;
  }
  return reportedPath(f);
}

/**
 * A file (or unit file) drift names both hashes; a unit's state drift names both states. A file
 * others may not read names neither hash, only that it differs (and how, when that is its mode).
 */
export function describeDrift(d: Drift): string {
  if (!d.path.startsWith('/')) return `unit ${d.path} changed outside the agent (expected ${d.expectedHash}, systemd says ${d.actualHash})`;
  const secret = WITHHELD.exec(d.expectedHash);
  if (secret) {
    const mode = secret[1]!;
    if (d.actualHash === '') return `${d.kind} ${d.path} changed outside the agent: it is missing (file mode ${mode}: hashes withheld)`;
    if (d.actualHash.startsWith('mode ')) return `${d.kind} ${d.path} changed outside the agent: file ${d.actualHash} instead of ${mode} (hashes withheld)`;
    return `${d.kind} ${d.path} changed outside the agent: content differs from the config (file mode ${mode}: hashes withheld)`;
  }
  return `${d.kind} ${d.path} changed outside the agent (expected sha256 ${d.expectedHash.slice(0, 12)}, found ${d.actualHash ? d.actualHash.slice(0, 12) : 'it missing'})`;
}

/**
 * What stands in a drift record for the hash of a file others may not read: the mode that makes
 * it so, within the 16 characters `mcctl get node` shows of a hash ("withheld (0600)").
 */
function withheld(mode: number): string {
  return `withheld (0${mode.toString(8)})`;
}
const WITHHELD = /^withheld \((0[0-7]+)\)$/;

function worldReadable(mode: number): boolean {
  return (mode & 0o004) !== 0;
}
