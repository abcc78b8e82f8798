// Writes a config's files so that, whatever instant the agent dies at, the managed files are all
// the old ones or all the new ones:
//
//   plan     the ops and their temp and undo names go into the journal (step "staging")
//   stage    new contents are written to fsynced temp files beside their targets; each file
//            that exists gets a hard link (its undo) to the old inode; originals of files taken
//            over for the first time are copied to the backup directory
//   commit   step "committing" is recorded, then every temp is renamed over its target
//
// A crash while staging rolls back (temps deleted: all old); a crash while committing rolls
// forward (remaining renames done: all new). Until the whole update is applied the undo links
// are kept, so a later failure (a unit that will not start, rpm-ostree refusing) can put every
// old inode back exactly.

// Every create, link, rename and unlink happens relative to a directory opened without following
// symlinks (no-follow-fs.ts), and each directory is opened once per step and kept: a directory
// swapped for a symlink after the check cannot redirect a write, and the cleanup after a failure
// works in the very directories the staging wrote to.

import { readFileSync, unlinkSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { fsyncPath, writeTempBeside } from './durable-fs.ts';
import type { BackupRecord, FileOp, Journal, JournalState } from './journal.ts';
import type { StepEvent } from './update-steps.ts';
import type { Failpoints } from './failpoints.ts';
import { DirCache, inParentOf, type DirHandle } from './no-follow-fs.ts';

export interface DesiredFile {
  hostPath: string;
  /** How the reason names it: "file /etc/chrony.conf", "unit chronyd.service", ... */
  object: string;
  bytes: Buffer;
  mode: number;
  uid?: number;
  gid?: number;
}

export interface StagedChange {
  writes: number;
  deletes: number;
  restores: number;
}

/**
 * Moves the pending update on by the step table's transition for `event`, with `change` in the
 * same journal write (the step table, not this file, says which step that is), then stops at the
 * new step's failpoint.
 */
export type Advance = (event: StepEvent, change?: (s: JournalState) => void) => void;

export class FileTransaction {
  /** The directories of the update in progress, held open from staging until it ends. */
  #dirs = new DirCache();

  private readonly journal: Journal;
  private readonly failpoints: Failpoints;
  private readonly advance: Advance;
  constructor(journal: Journal, failpoints: Failpoints, advance: Advance) {
    this.journal = journal;
    this.failpoints = failpoints;
    this.advance = advance;
  }

  /** Lets go of the directories held for the update (it is done, failed or superseded). */
  release(): void {
    this.#dirs.close();
  }

  /**
   * Plans and stages the change from the files managed now (`previous`, host paths) to `desired`.
   * Files already matching on disk are left alone unless `force`.
   */
  stage(desired: DesiredFile[], previous: string[], force: boolean): StagedChange {
    const pending = this.journal.state.pending!;
    const tag = pending.id;
    const wanted = new Map(desired.map((f) => [f.hostPath, f]));
    const ops: FileOp[] = [];
    const backupsToAdd: Record<string, BackupRecord> = {};
    const backupsToDrop: string[] = [];
    const contents = new Map<string, { bytes: Buffer; mode: number; uid?: number; gid?: number } | { symlink: string }>();
    const wasManaged = new Set(previous);
    let restores = 0;

    for (const f of desired) {
      if (!force && this.#matches(f)) continue;
      const exists = this.#exists(f.hostPath);
      if (exists && !wasManaged.has(f.hostPath) && !this.journal.state.backups[f.hostPath]) {
        backupsToAdd[f.hostPath] = this.#backupRecord(f.hostPath, tag);
      }
      ops.push({ hostPath: f.hostPath, action: 'write', temp: tempName(f.hostPath, tag), ...(exists ? { undo: undoName(f.hostPath, tag) } : {}) });
      contents.set(f.hostPath, f);
    }
    for (const hostPath of previous) {
      if (wanted.has(hostPath)) continue;
      const backup = this.journal.state.backups[hostPath];
      const exists = this.#exists(hostPath);
      if (backup) {
        // The original comes back: its bytes (or link) are staged like any new content.
        ops.push({ hostPath, action: 'write', temp: tempName(hostPath, tag), ...(exists ? { undo: undoName(hostPath, tag) } : {}) });
        contents.set(hostPath, backup.kind === 'symlink'
          ? { symlink: backup.linkTarget! }
          : { bytes: readFileSync(backup.backupFile!), mode: backup.mode ?? 0o644, uid: backup.uid, gid: backup.gid });
        backupsToDrop.push(hostPath);
        restores++;
      } else if (exists) {
        ops.push({ hostPath, action: 'delete', undo: undoName(hostPath, tag) });
      }
    }

    // 1. Record the plan before touching anything.
    this.advance('planned', (s) => {
      s.pending!.fileOps = ops;
      s.pending!.backupsToAdd = backupsToAdd;
      s.pending!.backupsToDrop = backupsToDrop;
    });

    // 2. Stage: backups of originals, undo links, new contents in temps.
    for (const [hostPath, record] of Object.entries(backupsToAdd)) {
      if (record.kind === 'file') {
        // Read without following a symlink: the original is the file at the checked path.
        const { dir, name } = this.#dirs.parentOf(hostPath);
        const bytes = dir.readFile(name) ?? Buffer.alloc(0);
        writeTempBeside(record.backupFile!, bytes, { mode: 0o600, sync: true }, record.backupFile!);
      }
    }
    fsyncPath(this.journal.backupDir);
    const written: { dir: DirHandle; name: string }[] = [];
    for (const [i, op] of ops.entries()) {
      const { dir, name } = this.#dirs.parentOf(op.hostPath, true);
      if (op.undo) {
        const undo = basename(op.undo);
        dir.unlinkIfExists(undo);
        dir.link(name, undo);
      }
      if (op.temp) {
        const c = contents.get(op.hostPath)!;
        const temp = basename(op.temp);
        dir.unlinkIfExists(temp);
        if ('symlink' in c) dir.symlink(c.symlink, temp);
        else {
          dir.writeNew(temp, c.bytes, { mode: c.mode, uid: c.uid, gid: c.gid, sync: false });
          written.push({ dir, name: temp });
        }
      }
      this.failpoints.hit('staging-file', i);
    }
    // fsync after all writes rather than after each: the filesystem batches the work.
    for (const { dir, name } of written) dir.fsyncFile(name);
    this.#dirs.fsyncAll();

    // 3. The point of no return: from here a crash rolls forward.
    this.advance('staged');
    return { writes: ops.filter((o) => o.action === 'write').length - restores, deletes: ops.filter((o) => o.action === 'delete').length, restores };
  }

  /** Renames every staged temp into place (idempotent: safe to run again after a crash). */
  commit(): void {
    const pending = this.journal.state.pending!;
    const ops = pending.fileOps ?? [];
    for (const [i, op] of ops.entries()) {
      const { dir, name } = this.#dirs.parentOf(op.hostPath);
      if (op.action === 'write' && op.temp && dir.exists(basename(op.temp))) dir.rename(basename(op.temp), name);
      if (op.action === 'delete') dir.unlinkIfExists(name);
      this.failpoints.hit('commit-file', i);
    }
    this.#dirs.fsyncAll();
    this.advance('committed', (s) => {
      for (const [path, record] of Object.entries(s.pending!.backupsToAdd ?? {})) s.backups[path] = record;
      // The originals put back are kept until the update is done: a rollback (a unit that will
      // not start, a failed health gate) makes them backups again, or they would be lost.
      const dropped: Record<string, BackupRecord> = {};
      for (const path of s.pending!.backupsToDrop ?? []) {
        if (s.backups[path]) dropped[path] = s.backups[path]!;
        delete s.backups[path];
      }
      s.pending!.droppedBackups = { ...s.pending!.droppedBackups, ...dropped };
      s.pending!.addedBackups = [...(s.pending!.addedBackups ?? []), ...Object.keys(s.pending!.backupsToAdd ?? {})];
      s.pending!.backupsToAdd = {};
      s.pending!.backupsToDrop = [];
    });
  }

  /** After a crash while staging: remove what was staged. The files on disk are all old. */
  abandonStaged(): void {
    const pending = this.journal.state.pending!;
    for (const op of pending.fileOps ?? []) {
      this.#bestEffort(op.hostPath, (dir) => {
        if (op.temp) dir.unlinkIfExists(basename(op.temp));
        if (op.undo) dir.unlinkIfExists(basename(op.undo));
      });
    }
    for (const record of Object.values(pending.backupsToAdd ?? {})) if (record.backupFile) removeIfExists(record.backupFile);
    this.advance('abandoned', (s) => {
      s.pending!.fileOps = [];
      s.pending!.backupsToAdd = {};
      s.pending!.backupsToDrop = [];
    });
  }

  /** Puts every old inode back (the update failed after its files were written). */
  rollBack(): void {
    const pending = this.journal.state.pending!;
    const ops = [...(pending.fileOps ?? [])].reverse();
    for (const op of ops) {
      this.#bestEffort(op.hostPath, (dir, name) => {
        if (op.temp) dir.unlinkIfExists(basename(op.temp));
        if (op.undo && dir.exists(basename(op.undo))) dir.rename(basename(op.undo), name);
        else if (!op.undo) dir.unlinkIfExists(name);
      });
    }
    this.#dirs.fsyncAll();
    // The backups follow the files: originals taken over by this update are no longer managed,
    // and the ones it put back are managed again.
    this.journal.update((s) => {
      const p = s.pending!;
      for (const path of p.addedBackups ?? []) {
        const record = s.backups[path];
        if (record?.backupFile) removeIfExists(record.backupFile);
        delete s.backups[path];
      }
      for (const [path, record] of Object.entries(p.droppedBackups ?? {})) s.backups[path] = record;
      p.addedBackups = [];
      p.droppedBackups = {};
    });
  }

  /** The update is applied: the undo links and the originals it put back are no longer needed. */
  finish(): void {
    for (const op of this.journal.state.pending?.fileOps ?? []) {
      if (op.undo) this.#bestEffort(op.hostPath, (dir) => dir.unlinkIfExists(basename(op.undo!)));
    }
    const dropped = Object.values(this.journal.state.pending?.droppedBackups ?? {});
    for (const record of dropped) if (record.backupFile) removeIfExists(record.backupFile);
    if (this.journal.state.pending && dropped.length) this.journal.update((s) => { s.pending!.droppedBackups = {}; });
    this.release();
  }

  /**
   * Cleanup that must not stop at the first directory it cannot reach safely (one swapped for a
   * symlink since, and never opened by this process): the rest is still put back.
   */
  #bestEffort(hostPath: string, fn: (dir: DirHandle, name: string) => void): void {
    try {
      const { dir, name } = this.#dirs.parentOf(hostPath);
      fn(dir, name);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      this.cleanupErrors.push(`${hostPath}: ${(err as Error).message}`);
    }
  }

  /** Whether `hostPath` exists, seen through the directory handle the update will write with. */
  #exists(hostPath: string): boolean {
    try {
      const { dir, name } = this.#dirs.parentOf(hostPath);
      return dir.exists(name);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
  }

  #matches(f: DesiredFile): boolean {
    try {
      const { dir, name } = this.#dirs.parentOf(f.hostPath);
      return fileMatches(dir, name, f);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
  }

  /** What the last cleanup could not do, for the log. */
  cleanupErrors: string[] = [];

  #backupRecord(hostPath: string, tag: string): BackupRecord {
    const { dir, name: base } = this.#dirs.parentOf(hostPath);
    const st = dir.lstat(base)!;
    if (st.isSymbolicLink()) return { kind: 'symlink', linkTarget: dir.readlink(base) };
    const name = createHash('sha256').update(hostPath).digest('hex').slice(0, 32);
    return { kind: 'file', backupFile: join(this.journal.backupDir, `${name}.${tag}`), mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
  }
}

/** Whether the file on disk already has these bytes, mode and owner (a symlink never matches). */
export function matchesOnDisk(f: DesiredFile): boolean {
  try {
    return inParentOf(f.hostPath, (dir, name) => fileMatches(dir, name, f));
  } catch {
    return false;
  }
}

function fileMatches(dir: DirHandle, name: string, f: DesiredFile): boolean {
  const st = dir.lstat(name);
  if (!st || !st.isFile() || (st.mode & 0o7777) !== f.mode || st.size !== f.bytes.byteLength) return false;
  if (f.uid !== undefined && st.uid !== f.uid) return false;
  if (f.gid !== undefined && st.gid !== f.gid) return false;
  return dir.readFile(name)?.equals(f.bytes) ?? false;
}

function tempName(hostPath: string, tag: string): string {
  return join(dirname(hostPath), `.${basename(hostPath)}.mcplane-new-${tag}`);
}

function undoName(hostPath: string, tag: string): string {
  return join(dirname(hostPath), `.${basename(hostPath)}.mcplane-old-${tag}`);
}

function removeIfExists(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}
