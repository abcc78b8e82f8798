// Writes that survive a crash or power loss at any instant: a temp file in the same directory,
// fsync, rename over the target, fsync of the directory. A reader sees the old file or the new
// one, never a mix; after the directory fsync the rename itself is on disk.

import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, writeSync, fchmodSync, fchownSync, unlinkSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';

export interface WriteOptions {
  mode?: number;
  uid?: number;
  gid?: number;
  /** false: the caller fsyncs later (batching many files' fsyncs is faster on ext4 and xfs). */
  sync?: boolean;
}

/**
 * Writes `data` durably to a new temp file beside `path` (or at `temp`, which must not exist)
 * and returns the temp file's path.
 */
export function writeTempBeside(path: string, data: Uint8Array | string, options: WriteOptions = {}, temp = join(dirname(path), `.${basename(path)}.mcplane-${randomBytes(6).toString('hex')}`)): string {
  const fd = openSync(temp, 'wx', 0o600);
  try {
    const buf = typeof data === 'string' ? Buffer.from(data) : data;
    let off = 0;
    while (off < buf.byteLength) off += writeSync(fd, buf, off, buf.byteLength - off);
    fchmodSync(fd, options.mode ?? 0o644);
    if (options.uid !== undefined || options.gid !== undefined) fchownSync(fd, options.uid ?? -1, options.gid ?? -1);
    if (options.sync !== false) fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    try { unlinkSync(temp); } catch { /* already gone */ }
    throw err;
  }
  closeSync(fd);
  return temp;
}

/**
 * fsync by path: a file whose bytes were written without it (copyFileSync, a batch of temps),
 * or a directory, which makes the renames and unlinks in it durable.
 */
export function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Renames into place and makes the rename durable. */
export function commitRename(temp: string, path: string): void {
  renameSync(temp, path);
  fsyncPath(dirname(path));
}

export function writeFileAtomic(path: string, data: Uint8Array | string, options: WriteOptions = {}): void {
  mkdirSync(dirname(path), { recursive: true });
  commitRename(writeTempBeside(path, data, options), path);
}

export function unlinkDurable(path: string): boolean {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  fsyncPath(dirname(path));
  return true;
}
