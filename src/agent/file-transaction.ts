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

import { copyFileSync, linkSync, lstatSync, mkdirSync, readFileSync, readlinkSync, renameSync, symlinkSync, unlinkSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { fsyncPath, writeTempBeside } from './durable-fs.ts';
import type { BackupRecord, FileOp, Journal } from './journal.ts';
import type { Failpoints } from './failpoints.ts';

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

export class FileTransaction {
  constructor(private readonly journal: Journal, private readonly failpoints: Failpoints) {}

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
      if (!force && matchesOnDisk(f)) continue;
      const exists = lexists(f.hostPath);
      if (exists && !wasManaged.has(f.hostPath) && !this.journal.state.backups[f.hostPath]) {
        backupsToAdd[f.hostPath] = this.#backupRecord(f.hostPath, tag);
      }
      ops.push({ hostPath: f.hostPath, action: 'write', temp: tempName(f.hostPath, tag), ...(exists ? { undo: undoName(f.hostPath, tag) } : {}) });
      contents.set(f.hostPath, f);
    }
    for (const hostPath of previous) {
      if (wanted.has(hostPath)) continue;
      const backup = this.journal.state.backups[hostPath];
      const exists = lexists(hostPath);
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
    this.journal.update((s) => {
      s.pending!.step = 'staging';
      s.pending!.fileOps = ops;
      s.pending!.backupsToAdd = backupsToAdd;
      s.pending!.backupsToDrop = backupsToDrop;
    });
    this.failpoints.hit('staging');

    // 2. Stage: backups of originals, undo links, new contents in temps.
    for (const [hostPath, record] of Object.entries(backupsToAdd)) {
      if (record.kind === 'file') {
        copyFileSync(hostPath, record.backupFile!);
        fsyncPath(record.backupFile!);
      }
    }
    fsyncPath(this.journal.backupDir);
    const made = new Set<string>();
    const written: string[] = [];
    for (const [i, op] of ops.entries()) {
      const dir = dirname(op.hostPath);
      if (!made.has(dir)) {
        mkdirSync(dir, { recursive: true });
        made.add(dir);
      }
      if (op.undo) {
        removeIfExists(op.undo);
        linkSync(op.hostPath, op.undo);
      }
      if (op.temp) {
        const c = contents.get(op.hostPath)!;
        removeIfExists(op.temp);
        if ('symlink' in c) symlinkSync(c.symlink, op.temp);
        else {
          writeTempBeside(op.hostPath, c.bytes, { mode: c.mode, uid: c.uid, gid: c.gid, sync: false }, op.temp);
          written.push(op.temp);
        }
      }
      this.failpoints.hit('staging-file', i);
    }
    // fsync after all writes rather than after each: the filesystem batches the work.
    for (const temp of written) fsyncPath(temp);
    for (const dir of made) fsyncPath(dir);

    // 3. The point of no return: from here a crash rolls forward.
    this.journal.update((s) => { s.pending!.step = 'committing'; });
    this.failpoints.hit('committing');
    return { writes: ops.filter((o) => o.action === 'write').length - restores, deletes: ops.filter((o) => o.action === 'delete').length, restores };
  }

  /** Renames every staged temp into place (idempotent: safe to run again after a crash). */
  commit(): void {
    const pending = this.journal.state.pending!;
    const ops = pending.fileOps ?? [];
    for (const [i, op] of ops.entries()) {
      if (op.action === 'write' && op.temp && lexists(op.temp)) renameSync(op.temp, op.hostPath);
      if (op.action === 'delete') removeIfExists(op.hostPath);
      this.failpoints.hit('commit-file', i);
    }
    for (const dir of new Set(ops.map((op) => dirname(op.hostPath)))) fsyncPath(dir);
    this.journal.update((s) => {
      for (const [path, record] of Object.entries(s.pending!.backupsToAdd ?? {})) s.backups[path] = record;
      for (const path of s.pending!.backupsToDrop ?? []) {
        const record = s.backups[path];
        if (record?.backupFile) removeIfExists(record.backupFile);
        delete s.backups[path];
      }
      s.pending!.backupsToAdd = {};
      s.pending!.backupsToDrop = [];
      s.pending!.step = 'files-done';
    });
  }

  /** After a crash while staging: remove what was staged. The files on disk are all old. */
  abandonStaged(): void {
    const pending = this.journal.state.pending!;
    for (const op of pending.fileOps ?? []) {
      if (op.temp) removeIfExists(op.temp);
      if (op.undo) removeIfExists(op.undo);
    }
    for (const record of Object.values(pending.backupsToAdd ?? {})) if (record.backupFile) removeIfExists(record.backupFile);
    this.journal.update((s) => {
      s.pending!.fileOps = [];
      s.pending!.backupsToAdd = {};
      s.pending!.backupsToDrop = [];
      s.pending!.step = 'check';
    });
  }

  /** Puts every old inode back (the update failed after its files were written). */
  rollBack(): void {
    const pending = this.journal.state.pending!;
    const ops = [...(pending.fileOps ?? [])].reverse();
    for (const op of ops) {
      if (op.temp) removeIfExists(op.temp);
      if (op.undo && lexists(op.undo)) renameSync(op.undo, op.hostPath);
      else if (!op.undo) removeIfExists(op.hostPath);
    }
    for (const dir of new Set(ops.map((op) => dirname(op.hostPath)))) fsyncPath(dir);
  }

  /** The update is applied: the undo links are no longer needed. */
  finish(): void {
    for (const op of this.journal.state.pending?.fileOps ?? []) if (op.undo) removeIfExists(op.undo);
  }

  #backupRecord(hostPath: string, tag: string): BackupRecord {
    const st = lstatSync(hostPath);
    if (st.isSymbolicLink()) return { kind: 'symlink', linkTarget: readlinkSync(hostPath) };
    const name = createHash('sha256').update(hostPath).digest('hex').slice(0, 32);
    return { kind: 'file', backupFile: join(this.journal.backupDir, `${name}.${tag}`), mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
  }
}

/** Whether the file on disk already has these bytes, mode and owner. */
export function matchesOnDisk(f: DesiredFile): boolean {
  let st;
  try {
    st = lstatSync(f.hostPath);
  } catch {
    return false;
  }
  if (!st.isFile() || (st.mode & 0o7777) !== f.mode || st.size !== f.bytes.byteLength) return false;
  if (f.uid !== undefined && st.uid !== f.uid) return false;
  if (f.gid !== undefined && st.gid !== f.gid) return false;
  return readFileSync(f.hostPath).equals(f.bytes);
}

function tempName(hostPath: string, tag: string): string {
  return join(dirname(hostPath), `.${basename(hostPath)}.mcplane-new-${tag}`);
}

function undoName(hostPath: string, tag: string): string {
  return join(dirname(hostPath), `.${basename(hostPath)}.mcplane-old-${tag}`);
}

function lexists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

function removeIfExists(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}
