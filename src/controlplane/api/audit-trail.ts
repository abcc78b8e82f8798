// The audit trail: every write through the API, and every refused one, stored (so it survives a
// failover on etcd and is in a SQLite backup) and logged as a structured line (`audit` key) an
// operator can ship. Written by the replica that answered the call, before the caller gets its
// answer: a write the caller saw succeed has its record.
//
// Bounded two ways, as Kubernetes bounds events: by age (--audit-retention, default 30 days) and
// by count (--audit-max-records, default 10,000). The replica that writes prunes, now and then:
// no leader is needed, and a replica that writes nothing has nothing to prune.

import { randomBytes } from 'node:crypto';
import type { Logger } from '../../runtime/logger.ts';
import type { Store, StoredObject } from '../store/store.ts';
import type { AuditRecordValue } from '../store/stored-records.ts';

export const DEFAULT_AUDIT_RETENTION_MS = 30 * 86_400_000;
export const DEFAULT_AUDIT_MAX_RECORDS = 10_000;
/** Pruning lists every record: at most this often unless the count may be over its bound. */
const PRUNE_INTERVAL_MS = 60_000;

export interface AuditOptions {
  retentionMs: number;
  maxRecords: number;
}

/** A name that sorts by time, unique across replicas. */
function recordName(at: number): string {
  return `${String(at).padStart(15, '0')}-${randomBytes(6).toString('hex')}`;
}

/** The records kept, oldest first, from `sinceMs` on (those past the retention are left out). */
export async function listAuditRecords(store: Store, sinceMs: number, retentionMs: number, now = Date.now()): Promise<StoredObject<AuditRecordValue>[]> {
  const { items: objects } = await store.list(['AuditRecord']);
  const from = Math.max(sinceMs, now - retentionMs);
  return (objects as StoredObject<AuditRecordValue>[]).filter((o) => o.value.at >= from).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export class AuditTrail {
  readonly #store: Store;
  readonly #log: Logger;
  readonly #replica: string;
  readonly options: AuditOptions;
  #writesSincePrune = 0;
  #lastPrune = 0;
  #pruning: Promise<void> = Promise.resolve();

  constructor(store: Store, log: Logger, replica: string, options: Partial<AuditOptions> = {}) {
    this.#store = store;
    this.#log = log;
    this.#replica = replica;
    this.options = { retentionMs: options.retentionMs ?? DEFAULT_AUDIT_RETENTION_MS, maxRecords: options.maxRecords ?? DEFAULT_AUDIT_MAX_RECORDS };
  }

  /** Stores and logs one record. Never throws: a store that cannot take it is logged, loudly. */
  async record(entry: Omit<AuditRecordValue, 'at' | 'replica'>): Promise<void> {
    const value: AuditRecordValue = { at: Date.now(), ...entry, replica: this.#replica };
    const line = { audit: value };
    if (value.result === 'OK') this.#log.info(line, `audit: ${value.method} by ${value.subject}`);
    else this.#log.warn(line, `audit: ${value.method} by ${value.subject} refused or failed: ${value.result}`);
    try {
      await this.#store.commit([{ type: 'put', kind: 'AuditRecord', name: recordName(value.at), value, expectedVersion: null }]);
    } catch (err) {
      this.#log.error({ err, audit: value }, 'could not store an audit record (the log line above is the only copy)');
      return;
    }
    this.#writesSincePrune++;
    const bound = Math.max(1, Math.floor(this.options.maxRecords / 10));
    if (this.#writesSincePrune >= bound || Date.now() - this.#lastPrune >= PRUNE_INTERVAL_MS) {
      this.#writesSincePrune = 0;
      this.#lastPrune = Date.now();
      this.#pruning = this.#pruning.then(() => this.#prune()).catch((err: unknown) => {
        this.#log.warn({ err }, 'could not prune the audit trail; the next write tries again');
      });
      await this.#pruning;
    }
  }

  /** Deletes the records past the retention, then the oldest beyond the count. */
  async #prune(): Promise<void> {
    const { items: objects } = await this.#store.list(['AuditRecord']);
    const all = (objects as StoredObject<AuditRecordValue>[]).sort((a, b) => (a.name < b.name ? -1 : 1));
    const cutoff = Date.now() - this.options.retentionMs;
    const expired = all.filter((o) => o.value.at < cutoff);
    const kept = all.length - expired.length;
    const excess = all.filter((o) => o.value.at >= cutoff).slice(0, Math.max(0, kept - this.options.maxRecords));
    const doomed = [...expired, ...excess];
    // Unconditional deletes, in commits of 100: a record another replica pruned first is gone either way.
    for (let i = 0; i < doomed.length; i += 100) {
      await this.#store.commit(doomed.slice(i, i + 100).map((o) => ({ type: 'delete' as const, kind: 'AuditRecord' as const, name: o.name })));
    }
    if (expired.length + excess.length) this.#log.debug({ expired: expired.length, excess: excess.length }, 'audit trail pruned');
  }
}
