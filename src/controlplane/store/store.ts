// The control plane's storage contract, shaped after etcd's: one global revision that every
// commit bumps, compare-and-swap on an object's revision, transactions of several objects, a
// watch that resumes from a revision, and leases that delete what is attached to them when they
// end. Two backends keep it: SQLite (one process, one machine) and etcd (several replicas).
// Everything above the store (the cache, controllers, services) sees only this interface.

export type StoredKind =
  /** The user's objects. */
  | 'MachineConfig'
  | 'MachineConfigPool'
  /** MachineConfiguration/cluster: the cluster-wide node disruption policy (MCO's object). */
  | 'MachineConfiguration'
  /** The leader's: a pool's target and conditions, kept apart from the user's spec. */
  | 'PoolStatus'
  | 'RenderedConfig'
  /** A host's identity: labels, registration time, the role it was enrolled for. */
  | 'Node'
  /** What the leader wants of a node: its pool and desired config. */
  | 'NodeAssignment'
  /** What the node's agent last reported, written by the replica holding its stream. */
  | 'NodeStatus'
  /** A live agent stream on some replica; attached to that replica's lease. */
  | 'AgentSession'
  /** An operator's request to re-apply a node's config, until its stream delivers it. */
  | 'ReapplyRequest'
  /** A running mcplane-server; attached to its lease. */
  | 'Replica'
  /** The leader election record; attached to the leader's lease. */
  | 'Leader'
  | 'EnrollmentToken'
  /** A pool-scoped bootstrap token (mcctl pki token create), under its public id. */
  | 'BootstrapToken'
  /** A certificate no replica accepts any more (mcctl node revoke, mcctl delete node). */
  | 'RevokedCertificate'
  /** A node's last updates (bounded); written by the replica holding its stream, fenced by the session epoch. */
  | 'NodeHistory'
  /** What happened (kubectl get events), bounded and expiring; written by the leader only. */
  | 'Event'
  /** The leader's: a drain in progress on a Kubernetes Node, so a new leader resumes it. */
  | 'NodeDrain'
  /** The leader's copy of a Kubernetes Node (labels, creation time, cordon, MCO annotations). */
  | 'KubernetesNode'
  /**
   * With --kubernetes-source: what the leader's source controller found wrong with the cluster's
   * MachineConfigs and pools (one record, `cluster`). Written by that controller only.
   */
  | 'KubernetesSource'
  /** An operator's `mcctl resume pool` past a rollout halt, until the leader clears the halt. */
  | 'PoolResume'
  /** A host's request to join without a bootstrap token, and the operator's decision on it. */
  | 'EnrollmentRequest'
  /**
   * The user's higher-level configs (MCO's KubeletConfig, ContainerRuntimeConfig, Image/cluster
   * and the image mirror sets): the leader's generated-config controller makes MachineConfigs of them.
   */
  | 'KubeletConfig'
  | 'ContainerRuntimeConfig'
  | 'Image'
  | 'ImageDigestMirrorSet'
  | 'ImageTagMirrorSet'
  | 'ImageContentSourcePolicy';

export const STORED_KINDS: readonly StoredKind[] = [
  'MachineConfig', 'MachineConfigPool', 'PoolStatus', 'RenderedConfig', 'Node', 'NodeAssignment',
  'NodeStatus', 'AgentSession', 'ReapplyRequest', 'Replica', 'Leader', 'EnrollmentToken',
  'MachineConfiguration',
  'NodeHistory', 'Event', 'KubernetesSource', 'NodeDrain', 'KubernetesNode', 'PoolResume',
  'BootstrapToken', 'RevokedCertificate',
  'EnrollmentRequest',
  'KubeletConfig', 'ContainerRuntimeConfig', 'Image', 'ImageDigestMirrorSet', 'ImageTagMirrorSet', 'ImageContentSourcePolicy',
];

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
  get<T>(kind: StoredKind, name: string): Promise<StoredObject<T> | undefined>;
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
