// Runs a CommonJS bundle from a V8 code cache made at the end of an earlier run (mcctl's launcher,
// src/cli/launcher.ts). Node's own compile cache (module.enableCompileCache) stores V8's code as
// it is right after the top-level compile: every function compiled later, while the program
// runs, is compiled again on every start. In a bundle that is nearly all of it (esbuild wraps
// each package's module in a function, compiled when first required), so `mcctl get pools`
// compiled grpc-js, commander and yaml on each run. script.createCachedData() after the run
// holds everything the run compiled.
//
// A cache is V8's code for one exact source: V8 itself checks only the source's length, so the
// directory is named after a CRC-32 of the bytes, Node's version and the architecture. A run
// that fails writes nothing (its code would be an error path's); a rejected cache (another
// V8, other flags) is replaced; a cache another user owns, or could have written, is not run.
// Caching never fails the program: when the directory cannot be written, the program runs as it
// would without it.

import { isAscii } from 'node:buffer';
import { closeSync, existsSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { debuglog } from 'node:util';
import { Script, constants as vmConstants } from 'node:vm';
import { crc32 } from 'node:zlib';

const debug = debuglog('mcctl');

export interface CodeCacheOptions {
  /** The directory that holds one subdirectory per build; undefined: run without a cache. */
  cacheRoot: string | undefined;
  /**
   * What this run is, among the program's runs: each name has a cache of its own, made by its
   * first successful run (mcctl: the verb; `get` and `apply` compile different code).
   */
  name: string;
}

type CommonJsWrapper = (exports: object, require: NodeJS.Require, module: { exports: object }, filename: string, dirname: string) => void;

/** Runs `file` (a CommonJS bundle) as require() would, from the code cache when there is one. */
export function runWithCodeCache(file: string, options: CodeCacheOptions): void {
  const bytes = readFileSync(file);
  // esbuild writes ASCII, which V8 takes as a one-byte string without decoding UTF-8 (3 ms).
  const source = isAscii(bytes) ? bytes.toString('latin1') : bytes.toString('utf8');
  const cacheFile = options.cacheRoot === undefined ? undefined : join(options.cacheRoot, buildKey(bytes), `${options.name}.v8`);
  const cachedData = cacheFile === undefined ? undefined : readOwnCache(cacheFile);
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {
    filename: file,
    cachedData,
    importModuleDynamically: vmConstants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  const state = cachedData === undefined ? 'absent' : script.cachedDataRejected ? 'rejected' : 'accepted';
  debug('code cache %s: %s', cacheFile ?? '(none)', state);
  if (cacheFile !== undefined && state !== 'accepted') {
    process.once('exit', (code) => {
      if (code === 0) saveCodeCache(cacheFile, () => script.createCachedData());
    });
  }
  const module = { exports: {} };
  (script.runInThisContext() as CommonJsWrapper)(module.exports, createRequire(file), module, file, dirname(file));
}

/** The cache directory's name for this source on this Node. */
function buildKey(bytes: Buffer): string {
  return `${process.version}-${process.arch}-${bytes.length}-${crc32(bytes).toString(16).padStart(8, '0')}`;
}

/**
 * The cache, if this user's own and writable by no one else: a cache is code this process runs.
 * `sudo -E mcctl` keeps the invoking user's XDG_CACHE_HOME, and root must not run code that
 * user could have written. Checked on the descriptor the bytes are read from.
 */
function readOwnCache(file: string): Buffer | undefined {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return undefined;
  }
  try {
    const st = fstatSync(fd);
    if (st.uid !== process.geteuid?.() || (st.mode & 0o022) !== 0) {
      debug('code cache %s: ignored: owner %d, mode %s; only one of this user, writable by no one else, is used', file, st.uid, (st.mode & 0o777).toString(8));
      return undefined;
    }
    return readFileSync(fd);
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes the cache beside its final name and renames it there, so that a run started meanwhile
 * reads the old file or the new one, never half of one. The first cache of a build removes the
 * caches of the builds before it.
 */
function saveCodeCache(file: string, data: () => Buffer): void {
  const dir = dirname(file);
  try {
    const fresh = !existsSync(dir);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const partial = `${file}.${process.pid}.partial`;
    writeFileSync(partial, data(), { mode: 0o600 });
    renameSync(partial, file);
    debug('code cache %s: written', file);
    if (fresh) {
      const root = dirname(dir);
      for (const other of readdirSync(root)) if (other !== basename(dir)) rmSync(join(root, other), { recursive: true, force: true });
    }
  } catch (err) {
    debug('code cache %s: not written: %s', file, (err as Error).message);
  }
}

