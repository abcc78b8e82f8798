// Writes that no symlink swap can redirect. Checking a path and then writing by that path leaves
// a window: a directory on the way can be replaced by a symlink in between (any local user can do
// it under /var/tmp), and a write by path then follows it out of /etc and /var as root.
//
// So the agent never writes by path. It opens the target's directory one component at a time
// from "/", each with O_DIRECTORY|O_NOFOLLOW relative to the directory opened before it (through
// /proc/self/fd/N/<component>, which the kernel resolves as openat(N, component) would: the
// magic link jumps to the opened inode, and only the last component is looked up). Every create,
// link, rename and unlink then names /proc/self/fd/N/<name>: it happens in the directory that was
// opened, whatever its path points at by then. A symlink found on the way is refused, never
// followed. Paths given here must already be resolved (no symlink components): host-paths.ts
// does that once, and anything that turns into a symlink afterwards is a change to refuse.

import { closeSync, constants, fchmodSync, fchownSync, fstatSync, fsyncSync, linkSync, lstatSync, mkdirSync, openSync, readFileSync, readlinkSync, renameSync, symlinkSync, unlinkSync, writeSync, type Stats } from 'node:fs';
import { basename, dirname } from 'node:path';
import { UnsafePathError } from '../machineconfig/index.ts';

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** A directory held open by descriptor: every operation is relative to this inode. */
export class DirHandle {
  #closed = false;

  readonly fd: number;
  readonly path: string;
  constructor(fd: number, path: string) {
    this.fd = fd;
    this.path = path;
  }

  /** The name inside this directory, as a path the kernel resolves relative to the descriptor. */
  at(name: string): string {
    if (!name || name.includes('/') || name === '.' || name === '..') throw new Error(`not a plain file name: ${JSON.stringify(name)}`);
    return `/proc/self/fd/${this.fd}/${name}`;
  }

  lstat(name: string): Stats | undefined {
    try {
      return lstatSync(this.at(name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw this.#named(err, name);
    }
  }

  exists(name: string): boolean {
    return this.lstat(name) !== undefined;
  }

  /** Reads a regular file without following a symlink at `name`; undefined when it is missing. */
  readFile(name: string): Buffer | undefined {
    let fd: number;
    try {
      fd = openSync(this.at(name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw this.#named(err, name);
    }
    try {
      if (!fstatSync(fd).isFile()) throw new Error(`${this.path}/${name} is not a regular file`);
      return readFileSync(fd);
    } finally {
      closeSync(fd);
    }
  }

  readlink(name: string): string {
    return readlinkSync(this.at(name));
  }

  /**
   * Creates `name` (which must not exist), writes `data`, sets mode and owner on the descriptor,
   * and fsyncs unless told the caller batches that.
   */
  writeNew(name: string, data: Uint8Array, options: { mode: number; uid?: number; gid?: number; sync?: boolean }): void {
    const fd = openSync(this.at(name), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      let off = 0;
      while (off < data.byteLength) off += writeSync(fd, data, off, data.byteLength - off);
      fchmodSync(fd, options.mode);
      if (options.uid !== undefined || options.gid !== undefined) fchownSync(fd, options.uid ?? -1, options.gid ?? -1);
      if (options.sync !== false) fsyncSync(fd);
    } catch (err) {
      closeSync(fd);
      this.unlinkIfExists(name);
      throw err;
    }
    closeSync(fd);
  }

  symlink(target: string, name: string): void {
    symlinkSync(target, this.at(name));
  }

  /** A hard link to the inode at `from` (a symlink is linked itself, never followed). */
  link(from: string, to: string): void {
    linkSync(this.at(from), this.at(to));
  }

  rename(from: string, to: string): void {
    renameSync(this.at(from), this.at(to));
  }

  unlinkIfExists(name: string): boolean {
    try {
      unlinkSync(this.at(name));
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw this.#named(err, name);
    }
  }

  /** fsyncs a file in this directory (opened without following a symlink). */
  fsyncFile(name: string): void {
    const fd = openSync(this.at(name), constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }

  /** Makes the creates, renames and unlinks in this directory durable. */
  fsync(): void {
    fsyncSync(this.fd);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    closeSync(this.fd);
  }

  #named(err: unknown, name: string): Error {
    const e = err as NodeJS.ErrnoException;
    // The /proc/self/fd/N path means nothing to a reader: name the real one.
    if (typeof e.message === 'string') e.message = e.message.replace(`/proc/self/fd/${this.fd}/${name}`, `${this.path}/${name}`);
    e.path = `${this.path}/${name}`;
    return e;
  }
}

/**
 * Opens the directory `path` (absolute, already resolved) by walking from "/" without following
 * any symlink; with `create`, missing directories are made (0755) one at a time, each inside the
 * directory opened before it.
 */
export function openDirNoFollow(path: string, create = false): DirHandle {
  if (!path.startsWith('/')) throw new Error(`not an absolute path: ${path}`);
  const parts = path.split('/').filter(Boolean);
  let fd = openSync('/', DIR_FLAGS);
  let at = '';
  try {
    for (const part of parts) {
      if (part === '.' || part === '..') throw new Error(`${path}: "${part}" is not allowed in a resolved path`);
      const next = `/proc/self/fd/${fd}/${part}`;
      let child: number;
      try {
        child = openSync(next, DIR_FLAGS);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' && create) {
          try {
            mkdirSync(next, 0o755);
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
          }
          try {
            child = openSync(next, DIR_FLAGS);
          } catch (e) {
            const c = (e as NodeJS.ErrnoException).code;
            if (c === 'ELOOP' || c === 'ENOTDIR') throw new UnsafePathError(path, `${at}/${part}`);
            throw e;
          }
        } else if (code === 'ELOOP' || code === 'ENOTDIR') {
          throw new UnsafePathError(path, `${at}/${part}`);
        } else {
          const e = err as NodeJS.ErrnoException;
          e.message = e.message.replace(next, `${at}/${part}`);
          e.path = `${at}/${part}`;
          throw e;
        }
      }
      closeSync(fd);
      fd = child;
      at = `${at}/${part}`;
    }
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  return new DirHandle(fd, path === '/' ? '/' : `/${parts.join('/')}`);
}

/** Directory handles opened once per path for the length of one piece of work. */
export class DirCache {
  #dirs = new Map<string, DirHandle>();

  /** The handle of the directory holding `path`, and the file's own name in it. */
  parentOf(path: string, create = false): { dir: DirHandle; name: string } {
    return { dir: this.dir(dirname(path), create), name: basename(path) };
  }

  dir(path: string, create = false): DirHandle {
    let d = this.#dirs.get(path);
    if (!d) {
      d = openDirNoFollow(path, create);
      this.#dirs.set(path, d);
    }
    return d;
  }

  /** fsyncs every directory opened so far. */
  fsyncAll(): void {
    for (const d of this.#dirs.values()) d.fsync();
  }

  close(): void {
    for (const d of this.#dirs.values()) d.close();
    this.#dirs.clear();
  }
}

/** Runs `fn` on the parent directory of `path`, opened without following symlinks. */
export function inParentOf<T>(path: string, fn: (dir: DirHandle, name: string) => T, create = false): T {
  const dir = openDirNoFollow(dirname(path), create);
  try {
    return fn(dir, basename(path));
  } finally {
    dir.close();
  }
}
