// `mcplane-server backup` and `mcplane-server restore`: an online copy of the SQLite store, and
// putting one back. The copy goes through SQLite's backup API (node:sqlite's backup()), which
// reads the live file under SQLite's own locks, so a running server keeps serving and the copy
// is one consistent revision, never a file copied while a commit was half in the WAL. A store
// on etcd is backed up with etcd's tools instead (etcdctl snapshot save; docs/backup-restore.md).

import { Command } from 'commander';
import { chownSync, existsSync, fsyncSync, openSync, closeSync, readFileSync, renameSync, rmSync, statSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { backup, DatabaseSync } from 'node:sqlite';
import { parse } from 'yaml';
import { BackupError, ConfigurationError } from '../machineconfig/index.ts';

/** The store file inside --data-dir (SqliteStore's name for it). */
const STORE_FILE = 'mcplane.db';
const DEFAULT_DATA_DIR = '/var/lib/mcplane-server';
/** Pages per backup step: all of them, so the copy is taken in one step at one revision. */
const ALL_PAGES = 1_000_000_000;

interface StoreFlags {
  dataDir?: string;
  config?: string;
}

/** --data-dir, else dataDir in --config (the server's own config file), else the RPM's default. */
function dataDirOf(flags: StoreFlags, verb: string): string {
  let file: { dataDir?: unknown; store?: unknown } = {};
  if (flags.config) {
    try {
      file = (parse(readFileSync(flags.config, 'utf8')) ?? {}) as typeof file;
    } catch (err) {
      throw new ConfigurationError(`--config ${flags.config}: ${(err as Error).message}`);
    }
    if (file.store) {
      throw new ConfigurationError(`${flags.config}: this server's store is ${String(file.store)}; mcplane-server ${verb} copies the SQLite store only. Use etcd's own tools: etcdctl snapshot save FILE, and etcdutl snapshot restore (docs/backup-restore.md)`);
    }
  }
  return resolve(flags.dataDir ?? (typeof file.dataDir === 'string' ? file.dataDir : DEFAULT_DATA_DIR));
}

/** What a store file holds, read through SQLite; throws naming the file when it is not a store. */
function describeStore(path: string): { objects: number; revision: number } {
  let db: DatabaseSync | undefined;
  try {
    db = new DatabaseSync(path, { readOnly: true });
    const check = db.prepare('PRAGMA integrity_check').all() as { integrity_check: string }[];
    if (check.length !== 1 || check[0]!.integrity_check !== 'ok') {
      throw new BackupError(`${path}: SQLite integrity check failed: ${check.map((r) => r.integrity_check).join('; ')}`);
    }
    const objects = (db.prepare('SELECT count(*) AS n FROM objects').get() as { n: number }).n;
    const revision = (db.prepare("SELECT value FROM meta WHERE key = 'revision'").get() as { value: number } | undefined)?.value ?? 0;
    return { objects, revision };
  } catch (err) {
    if (err instanceof BackupError) throw err;
    throw new BackupError(`${path} is not an mcplane store (${(err as Error).message})`);
  } finally {
    db?.close();
  }
}

/**
 * Whether a process (a running mcplane-server) has the store open. In WAL mode every connection
 * holds a shared lock on the database file for as long as it is open, so an exclusive lock with
 * no wait is refused exactly while another connection exists.
 */
function inUse(path: string): boolean {
  const db = new DatabaseSync(path);
  try {
    db.exec('PRAGMA busy_timeout = 0');
    db.exec('PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; COMMIT');
    return false;
  } catch {
    return true;
  } finally {
    db.close();
  }
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Copies `source` (an open store) to `target` through a temporary file beside it, as one
 * self-contained file (journal mode DELETE: no -wal to carry along), fsynced and then renamed,
 * so a crash leaves the old target or the whole new one.
 */
async function copyStore(source: DatabaseSync, target: string): Promise<void> {
  const tmp = `${target}.tmp-${process.pid}`;
  rmSync(tmp, { force: true });
  try {
    await backup(source, tmp, { rate: ALL_PAGES });
    const copy = new DatabaseSync(tmp);
    copy.exec('PRAGMA journal_mode = DELETE');
    copy.close();
    fsyncPath(tmp);
    renameSync(tmp, target);
    fsyncPath(dirname(target));
  } finally {
    rmSync(tmp, { force: true });
    rmSync(`${tmp}-journal`, { force: true });
  }
}

export async function runBackup(flags: StoreFlags & { to: string }): Promise<string> {
  const dataDir = dataDirOf(flags, 'backup');
  const path = join(dataDir, STORE_FILE);
  if (!existsSync(path)) throw new BackupError(`${path} does not exist: no SQLite store in ${dataDir} (give --data-dir, or --config with the server's config file)`);
  const to = resolve(flags.to);
  if (existsSync(to)) throw new BackupError(`--to ${to} exists; give a new file name (a backup never overwrites one)`);
  // A read-write connection with a busy timeout: the backup's read waits out a commit in progress
  // instead of failing, and the WAL is read as the server left it.
  const source = new DatabaseSync(path);
  try {
    source.exec('PRAGMA busy_timeout = 5000');
    await copyStore(source, to);
  } finally {
    source.close();
  }
  const { objects, revision } = describeStore(to);
  return `backed up ${objects} objects (revision ${revision}) from ${path} to ${to}`;
}

export async function runRestore(flags: StoreFlags & { from: string; force?: boolean }): Promise<string> {
  const from = resolve(flags.from);
  if (!existsSync(from)) throw new BackupError(`--from ${from} does not exist`);
  const { objects, revision } = describeStore(from);
  const dataDir = dataDirOf(flags, 'restore');
  const path = join(dataDir, STORE_FILE);
  let movedAside: string | undefined;
  if (existsSync(path)) {
    if (inUse(path)) throw new BackupError(`${path} is open in a running mcplane-server: stop it first (systemctl stop mcplane-server), then restore`);
    const current = describeStore(path);
    if (!flags.force) {
      throw new BackupError(`${path} exists (${current.objects} objects, revision ${current.revision}); --force moves it aside and restores ${from} in its place`);
    }
    movedAside = `${path}.before-restore-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    // The old store and its WAL together: SQLite folds a leftover WAL into the file it belongs to.
    for (const suffix of ['', '-wal', '-shm']) if (existsSync(path + suffix)) renameSync(path + suffix, movedAside + suffix);
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const source = new DatabaseSync(from, { readOnly: true });
  try {
    await copyStore(source, path);
  } finally {
    source.close();
  }
  // Run as root on an installed host, the restored file must still belong to the server's own
  // user (the RPM's mcplane-server), who owns the data directory.
  if (process.getuid?.() === 0) {
    const owner = statSync(dataDir);
    chownSync(path, owner.uid, owner.gid);
  }
  return `restored ${objects} objects (revision ${revision}) from ${from} to ${path}` +
    (movedAside ? `; the previous store is ${movedAside}` : '');
}

const storeOptions = (cmd: Command): Command => cmd
  .option('--data-dir <dir>', `the server's data directory (default: dataDir in --config, else ${DEFAULT_DATA_DIR})`)
  .option('--config <file>', 'the server\'s config file, to find its dataDir (e.g. /etc/mcplane/server.yaml)');

export function backupCommand(): Command {
  return storeOptions(new Command('mcplane-server backup')
    .description('copy the SQLite store to a file while the server runs (one consistent revision; etcd: use etcdctl snapshot save)'))
    .requiredOption('--to <file>', 'the backup file to write (must not exist)');
}

export function restoreCommand(): Command {
  return storeOptions(new Command('mcplane-server restore')
    .description('put a backup in place of the SQLite store; the server must be stopped'))
    .requiredOption('--from <file>', 'a file written by mcplane-server backup')
    .option('--force', 'move an existing store aside (mcplane.db.before-restore-TIME) instead of refusing');
}

/** `mcplane-server backup ...` and `mcplane-server restore ...`: argv starts with the verb. */
export async function backupMain(argv: string[]): Promise<void> {
  const verb = argv[0];
  const program = (verb === 'backup' ? backupCommand() : restoreCommand()).showHelpAfterError();
  program.parse(argv.slice(1), { from: 'user' });
  const message = verb === 'backup'
    ? await runBackup(program.opts<StoreFlags & { to: string }>())
    : await runRestore(program.opts<StoreFlags & { from: string; force?: boolean }>());
  process.stdout.write(`${message}\n`);
}
