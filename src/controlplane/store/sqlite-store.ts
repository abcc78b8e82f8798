// The embedded store: one SQLite file through node:sqlite, WAL mode with synchronous=FULL so a
// commit is on disk before it is acknowledged. Every commit bumps one global revision, which
// becomes the resourceVersion of each object it wrote: etcd's model, so the two backends agree
// and everything above them is written once.
//
// One process owns the file, so two etcd features are kept in memory and need no disk: the
// watch history (a bounded window of recent events; a watch from before it is told the revision
// was compacted, as etcd would) and leases (they live as long as this process: objects attached
// to a lease of an earlier process are deleted when the file is opened, as an expired etcd lease
// would delete them).

import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { ConflictError, StoreLimitError } from '../../machineconfig/index.ts';
import { turnIfDue } from '../../runtime/turn-budget.ts';
import { checkCommitLimits } from './store-limits.ts';
import { WatchFanout } from './watch-fanout.ts';
import { putJson, type ChangeEvent, type CommitResult, type Lease, type ListResult, type Store, type StoredKind, type StoredObject, type WatchHandlers, type WriteOp } from './store.ts';
import type { StoredValue } from './stored-records.ts';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS objects (
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  value TEXT NOT NULL,
  revision INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (kind, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (key, value) VALUES ('revision', 0);
`;

/** Recent events kept for watches that resume from a revision; older ones count as compacted. */
const WATCH_HISTORY_EVENTS = 20_000;

interface Row {
  kind: string;
  name: string;
  value: string;
  revision: number;
  created_at: number;
  lease: string | null;
}

export class SqliteStore implements Store {
  readonly backend = 'sqlite' as const;
  readonly path: string;
  #db: DatabaseSync;
  #stmt: Record<'get' | 'list' | 'listAll' | 'upsert' | 'delete' | 'revision' | 'bump' | 'byLease', StatementSync>;
  #fanout = new WatchFanout(WATCH_HISTORY_EVENTS);
  #leases = new Map<string, SqliteLease>();

  constructor(dataDir: string) {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    this.path = join(dataDir, 'mcplane.db');
    this.#db = new DatabaseSync(this.path);
    this.#db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;');
    this.#db.exec(SCHEMA);
    const columns = this.#db.prepare('PRAGMA table_info(objects)').all() as { name: string }[];
    if (!columns.some((c) => c.name === 'lease')) this.#db.exec('ALTER TABLE objects ADD COLUMN lease TEXT');
    const select = 'SELECT kind, name, value, revision, created_at, lease FROM objects';
    this.#stmt = {
      get: this.#db.prepare(`${select} WHERE kind = ? AND name = ?`),
      list: this.#db.prepare(`${select} WHERE kind = ? ORDER BY name`),
      listAll: this.#db.prepare(`${select} ORDER BY kind, name`),
      upsert: this.#db.prepare(
        'INSERT INTO objects (kind, name, value, revision, created_at, lease) VALUES (?, ?, ?, ?, ?, ?) ' +
        'ON CONFLICT (kind, name) DO UPDATE SET value = excluded.value, revision = excluded.revision, created_at = excluded.created_at, lease = excluded.lease'),
      delete: this.#db.prepare('DELETE FROM objects WHERE kind = ? AND name = ?'),
      revision: this.#db.prepare("SELECT value FROM meta WHERE key = 'revision'"),
      bump: this.#db.prepare("UPDATE meta SET value = ? WHERE key = 'revision'"),
      byLease: this.#db.prepare(`${select} WHERE lease = ?`),
    };
    // Leases of an earlier process ended with it.
    const orphans = this.#db.prepare('SELECT kind, name FROM objects WHERE lease IS NOT NULL').all() as { kind: StoredKind; name: string }[];
    if (orphans.length) this.#commitNow(orphans.map((o) => ({ type: 'delete', kind: o.kind, name: o.name })));
    this.#fanout.start(this.#revision());
  }

  async get<K extends StoredKind>(kind: K, name: string): Promise<StoredObject<StoredValue<K>> | undefined> {
    const row = this.#stmt.get.get(kind, name) as Row | undefined;
    return row ? toObject<StoredValue<K>>(row) : undefined;
  }

  async list(kinds?: readonly StoredKind[]): Promise<ListResult> {
    // node:sqlite is synchronous, so the reads and the revision are one snapshot.
    const rows = kinds
      ? kinds.flatMap((k) => this.#stmt.list.all(k) as unknown as Row[])
      : (this.#stmt.listAll.all() as unknown as Row[]);
    return { items: rows.map((r) => toObject(r)), revision: this.#revision() };
  }

  async commit(ops: WriteOp[]): Promise<CommitResult> {
    checkCommitLimits(ops);
    for (const op of ops) {
      if (op.type === 'put' && op.lease !== undefined && !this.#leases.has(op.lease)) {
        throw new StoreLimitError(`${op.kind}/${op.name}: lease ${op.lease} does not exist (revoked or never granted)`);
      }
    }
    const result = this.#commitNow(ops);
    // node:sqlite commits synchronously. Resolving at once every time would let a caller's next
    // commit, and the next, run as one microtask chain that keeps the loop from serving anything
    // else (an agent's report, a status read) until it ends; etcd's commits are I/O and never
    // did. Past the loop's turn budget the caller goes on in the next turn (runtime/turn-budget.ts).
    await turnIfDue();
    return result;
  }

  #commitNow(ops: WriteOp[]): CommitResult {
    const events: ChangeEvent[] = [];
    let revision = this.#revision();
    this.#db.exec('BEGIN IMMEDIATE');
    try {
      revision += 1;
      const now = Date.now();
      // Every version is checked against the state before the commit, as etcd compares do.
      const currents = ops.map((op) => this.#stmt.get.get(op.kind, op.name) as Row | undefined);
      ops.forEach((op, i) => checkVersion(op, currents[i]));
      for (const [i, op] of ops.entries()) {
        const current = currents[i];
        if (op.type === 'put') {
          const createdAt = op.createdAt ?? current?.created_at ?? now;
          this.#stmt.upsert.run(op.kind, op.name, putJson(op), revision, createdAt, op.lease ?? null);
          const object: StoredObject = { kind: op.kind, name: op.name, value: op.value, resourceVersion: String(revision), createdAt };
          if (op.lease !== undefined) object.lease = op.lease;
          events.push({ type: 'put', object });
        } else if (op.type === 'delete' && current) {
          this.#stmt.delete.run(op.kind, op.name);
          events.push({ type: 'delete', object: { ...toObject(current), resourceVersion: String(revision) } });
        }
      }
      if (events.length === 0) {
        this.#db.exec('ROLLBACK');
        return { revision: revision - 1, objects: [] };
      }
      this.#stmt.bump.run(revision);
      this.#db.exec('COMMIT');
    } catch (err) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      throw err;
    }
    this.#fanout.publish(events, revision);
    return { revision, objects: events.filter((e) => e.type === 'put').map((e) => e.object) };
  }

  watch(afterRevision: number, handlers: WatchHandlers): () => void {
    return this.#fanout.watch(afterRevision, handlers);
  }

  /** Forgets watch history up to `revision`, as etcd's compaction does (tests use it). */
  compact(revision: number): void {
    this.#fanout.compact(revision);
  }

  async grantLease(ttlMs: number): Promise<Lease> {
    const lease = new SqliteLease(randomBytes(8).toString('hex'), ttlMs, async () => {
      this.#leases.delete(lease.id);
      const rows = this.#stmt.byLease.all(lease.id) as unknown as Row[];
      if (rows.length) this.#commitNow(rows.map((r) => ({ type: 'delete', kind: r.kind as StoredKind, name: r.name })));
    });
    this.#leases.set(lease.id, lease);
    return lease;
  }

  async close(): Promise<void> {
    this.#fanout.close();
    this.#leases.clear();
    if (this.#db.isOpen) this.#db.close();
  }

  #revision(): number {
    return Number((this.#stmt.revision.get() as { value: number }).value);
  }
}

/** A lease in a one-process store: alive until revoked, since its holder is this process. */
class SqliteLease implements Lease {
  readonly lastRenewedAt = Date.now();
  #revoked = false;
  #listeners: ((reason: string) => void)[] = [];

  readonly id: string;
  readonly ttlMs: number;
  private readonly onRevoke: () => Promise<void>;
  constructor(id: string, ttlMs: number, onRevoke: () => Promise<void>) {
    this.id = id;
    this.ttlMs = ttlMs;
    this.onRevoke = onRevoke;
  }

  isAlive(): boolean {
    return !this.#revoked;
  }

  onLost(listener: (reason: string) => void): void {
    this.#listeners.push(listener);
  }

  async revoke(): Promise<void> {
    if (this.#revoked) return;
    this.#revoked = true;
    await this.onRevoke();
  }
}

function checkVersion(op: WriteOp, current: Row | undefined): void {
  if (op.expectedVersion === undefined) return;
  const actual = current ? String(current.revision) : null;
  if (op.expectedVersion !== actual) {
    throw new ConflictError(op.kind, op.name, op.expectedVersion ?? '<absent>', actual ?? '<absent>');
  }
}

function toObject<T>(row: Row): StoredObject<T> {
  const object: StoredObject<T> = {
    kind: row.kind as StoredKind,
    name: row.name,
    value: JSON.parse(row.value) as T,
    resourceVersion: String(row.revision),
    createdAt: row.created_at,
  };
  if (row.lease) object.lease = row.lease;
  return object;
}
