// The control plane's storage contract, shaped after etcd's: one global revision that every
// commit bumps, compare-and-swap on an object's revision, transactions of several objects, a
// watch that resumes from a revision, and leases that delete what is attached to them when they
// end. Two backends keep it: SQLite (one process, one machine) and etcd (several replicas).
// Everything above the store (the cache, controllers, services) sees only this interface.

// The kinds, with who writes each, are in kinds.ts.
export { STORED_KINDS, type StoredKind } from './kinds.ts';
import type { StoredKind } from './kinds.ts';
import type { StoredValue } from './stored-records.ts';

export interface StoredObject<T = unknown> {
  kind: StoredKind;
  name: string;
  value: T;
  /** The revision of the commit that last wrote this object (etcd's mod_revision). */
  resourceVersion: string;
  /** Unix milliseconds of the object's creation. */
  createdAt: number;
  /** The lease the object is attached to, if any. */
  lease?: string;
}

export interface PutOp {
  type: 'put';
  kind: StoredKind;
  name: string;
  value: unknown;
  /** undefined: write whatever is there; null: the object must not exist; else: must match. */
  expectedVersion?: string | null;
  /**
   * The creation time to keep on an update (the caller's cache has it). When absent, a new
   * object gets the commit time and an existing one keeps its own.
   */
  createdAt?: number;
  /** Attach the object to this lease: it is deleted when the lease ends. */
  lease?: string;
  /**
   * JSON.stringify(value), when the writer has that text already: a rendered config's spec is
   * megabytes, and the render made its text once (RenderedConfig.specJson). The size checks and
   * the backends write this rather than serializing the value again.
   */
  json?: string;
}

/** The text a put stores: its value as JSON. */
export function putJson(op: PutOp): string {
  return op.json ?? JSON.stringify(op.value);
}

export interface DeleteOp {
  type: 'delete';
  kind: StoredKind;
  name: string;
  expectedVersion?: string;
}

/** Writes nothing; the commit fails unless the object is at this version (null: absent). */
export interface CheckOp {
  type: 'check';
  kind: StoredKind;
  name: string;
  expectedVersion: string | null;
}

export type WriteOp = PutOp | DeleteOp | CheckOp;

export interface ChangeEvent {
  type: 'put' | 'delete';
  /** For a delete: the object as it was, with the revision of the delete as resourceVersion. */
  object: StoredObject;
}

export interface ListResult {
  items: StoredObject[];
  /** The store revision the list was read at: a watch from here misses nothing. */
  revision: number;
}

export interface CommitResult {
  /** The revision this commit created (unchanged when it wrote nothing). */
  revision: number;
  /** The objects written, with their new resourceVersion. */
  objects: StoredObject[];
}

export interface WatchHandlers {
  /** Every change after the start revision, in revision order, each revision's events at once. */
  onEvents(events: ChangeEvent[], revision: number): void;
  /**
   * The start revision (or one the watch needed to resume from) was compacted away: events were
   * lost, so the caller must list again and watch from the list's revision. The watch has ended.
   */
  onCompacted(compactRevision: number): void;
}

export interface Lease {
  readonly id: string;
  readonly ttlMs: number;
  /** When the store last confirmed the lease alive (Unix ms). */
  readonly lastRenewedAt: number;
  /**
   * True while the lease is certainly alive: renewed less than a TTL ago (minus a safety
   * margin), so whatever is attached to it still exists. Leaders check this before acting.
   */
  isAlive(now?: number): boolean;
  /** Called once when the lease is gone or can no longer be known to be alive. */
  onLost(listener: (reason: string) => void): void;
  /** Ends the lease now: everything attached to it is deleted. */
  revoke(): Promise<void>;
}

/** The limits etcd applies by default; the SQLite store applies the same so both agree. */
export const STORE_LIMITS = {
  /** etcd --max-txn-ops */
  maxOpsPerCommit: 128,
  /** etcd --max-request-bytes (1.5 MiB), for the whole commit. */
  maxRequestBytes: 1.5 * 1024 * 1024,
} as const;

export interface Store {
  readonly backend: 'sqlite' | 'etcd';
  /** The object of `kind` named `name`, typed as that kind's value (StoredValues). */
  get<K extends StoredKind>(kind: K, name: string): Promise<StoredObject<StoredValue<K>> | undefined>;
  /** Every object of these kinds (all kinds when omitted), read at one revision. */
  list(kinds?: readonly StoredKind[]): Promise<ListResult>;
  /**
   * Applies every op or none: a ConflictError names the first op whose expectedVersion did not
   * hold; a StoreLimitError says which limit a commit broke. Resolves once the commit is durable:
   * an acknowledged write survives kill -9.
   */
  commit(ops: WriteOp[]): Promise<CommitResult>;
  /**
   * Delivers every change with a revision above `afterRevision`, including this process's own
   * commits, until the returned function is called or the handlers are told of a compaction.
   */
  watch(afterRevision: number, handlers: WatchHandlers): () => void;
  /** A lease the store keeps alive with keep-alives until it is revoked or lost. */
  grantLease(ttlMs: number): Promise<Lease>;
  close(): Promise<void>;
}
