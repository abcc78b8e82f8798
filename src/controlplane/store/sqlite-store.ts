// The embedded store: one SQLite file through node:sqlite, WAL mode with synchronous=FULL so a
// commit is on disk before it is acknowledged. Every commit bumps one global revision, which
// becomes the resourceVersion of each object it wrote (etcd's model, so the two agree).

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { ConflictError } from '../../machineconfig/index.ts';
import type { ChangeEvent, Store, StoredKind, StoredObject, WriteOp } from './store.ts';

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

interface Row {
  kind: string;
  name: string;
  value: string;
  revision: number;
  created_at: number;
}

export class SqliteStore implements Store {
  readonly path: string;
  #db: DatabaseSync;
  #listeners = new Set<(events: ChangeEvent[]) => void>();
  #stmt: Record<'get' | 'list' | 'upsert' | 'delete' | 'revision' | 'bump', StatementSync>;

  constructor(dataDir: string) {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    this.path = join(dataDir, 'mcplane.db');
    this.#db = new DatabaseSync(this.path);
    this.#db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;');
    this.#db.exec(SCHEMA);
    this.#stmt = {
      get: this.#db.prepare('SELECT kind, name, value, revision, created_at FROM objects WHERE kind = ? AND name = ?'),
      list: this.#db.prepare('SELECT kind, name, value, revision, created_at FROM objects WHERE kind = ? ORDER BY name'),
      upsert: this.#db.prepare(
        'INSERT INTO objects (kind, name, value, revision, created_at) VALUES (?, ?, ?, ?, ?) ' +
        'ON CONFLICT (kind, name) DO UPDATE SET value = excluded.value, revision = excluded.revision'),
      delete: this.#db.prepare('DELETE FROM objects WHERE kind = ? AND name = ?'),
      revision: this.#db.prepare("SELECT value FROM meta WHERE key = 'revision'"),
      bump: this.#db.prepare("UPDATE meta SET value = ? WHERE key = 'revision'"),
    };
  }

  async get<T>(kind: StoredKind, name: string): Promise<StoredObject<T> | undefined> {
    const row = this.#stmt.get.get(kind, name) as Row | undefined;
    return row ? toObject<T>(row) : undefined;
  }

  async list<T>(kind: StoredKind): Promise<StoredObject<T>[]> {
    return (this.#stmt.list.all(kind) as unknown as Row[]).map((r) => toObject<T>(r));
  }

  async commit(ops: WriteOp[]): Promise<StoredObject[]> {
    if (ops.length === 0) return [];
    const events: ChangeEvent[] = [];
    this.#db.exec('BEGIN IMMEDIATE');
    try {
      const revision = Number((this.#stmt.revision.get() as { value: number }).value) + 1;
      const now = Date.now();
      for (const op of ops) {
        const current = this.#stmt.get.get(op.kind, op.name) as Row | undefined;
        checkVersion(op, current);
        if (op.type === 'put') {
          const value = JSON.stringify(op.value);
          const createdAt = current?.created_at ?? now;
          this.#stmt.upsert.run(op.kind, op.name, value, revision, createdAt);
          events.push({ type: 'put', object: { kind: op.kind, name: op.name, value: op.value, resourceVersion: String(revision), createdAt } });
        } else if (current) {
          this.#stmt.delete.run(op.kind, op.name);
          events.push({ type: 'delete', object: toObject(current) });
        }
      }
      this.#stmt.bump.run(revision);
      this.#db.exec('COMMIT');
    } catch (err) {
      this.#db.exec('ROLLBACK');
      throw err;
    }
    for (const listener of this.#listeners) listener(events);
    return events.filter((e) => e.type === 'put').map((e) => e.object);
  }

  watch(listener: (events: ChangeEvent[]) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.#listeners.clear();
    if (this.#db.isOpen) this.#db.close();
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
  return {
    kind: row.kind as StoredKind,
    name: row.name,
    value: JSON.parse(row.value) as T,
    resourceVersion: String(row.revision),
    createdAt: row.created_at,
  };
}
