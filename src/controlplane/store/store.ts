// The control plane's storage contract. Controllers and services see only this interface, so a
// distributed backend (etcd: revisions, Txn with compares, Watch) can replace the embedded
// SQLite one without touching them. It is async for that reason, though SQLite is not.

export type StoredKind = 'MachineConfig' | 'MachineConfigPool' | 'RenderedConfig' | 'Node' | 'EnrollmentToken';

export interface StoredObject<T = unknown> {
  kind: StoredKind;
  name: string;
  value: T;
  /** Changes on every write of this object; compare-and-swap uses it. */
  resourceVersion: string;
  /** Unix milliseconds of the first write of this object. */
  createdAt: number;
}

export interface PutOp {
  type: 'put';
  kind: StoredKind;
  name: string;
  value: unknown;
  /** undefined: write whatever is there; null: the object must not exist; else: must match. */
  expectedVersion?: string | null;
}

export interface DeleteOp {
  type: 'delete';
  kind: StoredKind;
  name: string;
  expectedVersion?: string;
}

export type WriteOp = PutOp | DeleteOp;

export interface ChangeEvent {
  type: 'put' | 'delete';
  object: StoredObject;
}

export interface Store {
  get<T>(kind: StoredKind, name: string): Promise<StoredObject<T> | undefined>;
  list<T>(kind: StoredKind): Promise<StoredObject<T>[]>;
  /**
   * Applies every op or none (a ConflictError names the first stale one). Resolves once the
   * batch is durable: an acknowledged write survives kill -9.
   */
  commit(ops: WriteOp[]): Promise<StoredObject[]>;
  /** Called after each durable commit, in commit order. Returns an unsubscribe function. */
  watch(listener: (events: ChangeEvent[]) => void): () => void;
  close(): Promise<void>;
}
