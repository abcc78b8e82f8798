// The values the control plane keeps in the store, one type per StoredKind. Each kind has one
// writer, so replicas never fight over an object: the user (MachineConfig, MachineConfigPool),
// the leader (PoolStatus, RenderedConfig, NodeAssignment, NodeDrain, KubernetesNode), the replica holding a node's stream
// (NodeStatus, AgentSession), each replica for itself (Replica), and the election (Leader).

import type { ImportedKind, ParsedValue, UserKind } from '../../machineconfig/api-kinds.ts';
import type { StoredKind } from './kinds.ts';
import type { DriftPolicy, Labels, NodeStatus, PoolStatus, Problem, RenderedConfig, RolloutState, UpdateRecord } from '../../machineconfig/index.ts';
import type { CertificateBinding } from '../../runtime/pki.ts';

export type StoredRendered = Omit<RenderedConfig, 'specJson'>;

/** The leader's view of a pool, stored apart from the user's spec (Kubernetes' status). */
export interface PoolStatusRecord {
  /** The rendered config the pool targets; "" before the first successful render. */
  target: string;
  targetSources: string[];
  /** The latest render's problems; empty when it rendered. */
  renderProblems: Problem[];
  /** A digest of the render's inputs (pool spec and selected configs with their versions). */
  renderedInputs: string;
  /** The store revision the latest render read: Apply waits until this passes its commit. */
  renderedRevision: number;
  /** Counts and conditions; transition times survive a failover because they are stored. */
  status?: PoolStatus;
  /** spec.rollout's bookkeeping (the rollout controller's): stable config, canary soak, halt. */
  rollout?: RolloutState;
}

/** A host's identity: written when it enrolls or registers, and by `mcctl label node`. */
export interface NodeRecordValue {
  labels: Labels;
  /** The pool the host was enrolled for through the bootstrap endpoint, if it was. */
  enrolledFor?: string;
  /** False while the record exists only from enrollment: the first registration adds labels. */
  registered?: boolean;
  /** Labels the agent asked for and did not get (another role, or a change after creation). */
  ignoredLabels?: Labels;
  /**
   * The labels among `labels` that came from the agent's own report: they describe the host and
   * never choose its pool. An operator's `mcctl label node` of a key makes it the operator's.
   */
  reportedLabels?: Labels;
  /** The one certificate this node may connect with (enrollment, or its first registration). */
  certificate?: CertificateBinding;
  /**
   * The certificate the node renewed from, still accepted until the agent registers with the
   * new one (its stream switches over without a gap) or it expires.
   */
  previousCertificate?: CertificateBinding;
}

/**
 * A node name's certificate generation, under the node's name. Every node certificate carries
 * the generation it was issued at (pki.ts); `mcctl node revoke` and `mcctl delete node` raise
 * it, and every replica refuses, and ends the streams of, certificates of an older generation.
 * A node's trust is then one number that holds for every certificate ever issued for the name,
 * where a revoked fingerprint covers only the one certificate it names. No record: generation 0.
 * Kept after the node is deleted (that is when it matters most); one small record per name.
 */
export interface NodeGenerationRecord {
  generation: number;
  raisedAt: number;
  raisedBy: string;
  reason: 'revoked' | 'deleted';
}

/**
 * A bootstrap token made with `mcctl pki token create`, stored under its public id. It serves
 * one pool's config (and that pool's enrollment tokens) only.
 */
export interface BootstrapTokenRecord {
  pool: string;
  /** SHA-256 (hex) of the whole token; the secret itself is shown once, when it is made. */
  secretHash: string;
  createdAt: number;
  /** Unix milliseconds; absent: valid until deleted. */
  expiresAt?: number;
  description?: string;
  createdBy?: string;
}

/**
 * A certificate refused from now on, stored under its SHA-256 fingerprint: a revoked node's, or a
 * deleted node's. Kept until the certificate would have expired anyway.
 */
export interface RevokedCertificateRecord {
  node: string;
  serial: string;
  notAfter: number;
  revokedAt: number;
  revokedBy: string;
  reason: 'revoked' | 'deleted';
}

/** The leader's decisions about a node. */
export interface NodeAssignmentRecord {
  /** The node's primary pool; "" when none selects it. */
  pool: string;
  /** Why the node has no pool, when it has none. */
  poolError?: string;
  /** The rendered config the node must run; "" until the rollout gives it one. */
  desiredConfig: string;
  /**
   * Set in the same write as a desiredConfig that needs a drain: the dispatcher sends nothing
   * while it stands, and the drain controller clears it once the node is drained.
   */
  holdForDrain?: boolean;
  /**
   * Staging before the drain (issue 32): the config this node will be given next, sent for the
   * agent to download while it keeps running desiredConfig. The rollout gives it desiredConfig
   * only once the node reports Staged for it; the assignment that does so drops this field.
   */
  stageConfig?: string;
  /** Why this update went ahead without a drain (no Kubernetes Node, a single-node cluster). */
  drainNote?: string;
  /**
   * The disruption policy (JSON, "" for none) the drain and the maintenance window were decided
   * with. The dispatcher sends this one, not the live policy: an agent must never plan a reboot
   * with a policy nobody drained for. A policy change reaches an unfinished update only when the
   * rollout re-decides with it. Absent in records from before it existed: the live policy goes.
   */
  disruptionPolicyJson?: string;
  /**
   * The drift policy and the health check (JSON, "" for none) of the desired config's pool, as
   * the agent receives them. Unlike the disruption policy they follow the pool's spec at once,
   * on every node whatever its state: the leader writes each change into the assignments, so the
   * replica holding a node's stream sends what is stored and decides nothing. Absent in records
   * from before they were stored: the dispatcher sends the live values until the leader fills
   * them in (its first pass does).
   */
  driftPolicy?: DriftPolicy;
  healthCheckJson?: string;
  /** The pool's spec.driftIgnore, followed like the drift policy; absent when it has none. */
  driftIgnore?: string[];
  /** The pool's try mode (spec.rollout.confirm) as JSON, "" for none; absent in records from before it existed. */
  tryJson?: string;
}

/** What the node's agent last said, written by the replica holding its stream. */
export interface NodeStatusRecord {
  status: NodeStatus;
  /** When a replica last heard from the agent (status or registration). */
  lastSeen: number;
}

/** A live agent stream. Its resourceVersion is the session's epoch. */
export interface AgentSessionRecord {
  replica: string;
  since: number;
  bootId: string;
}

/**
 * `mcctl apply --try`, stored under the rendered config the Apply produces (its name is the hash
 * of what it renders, computed as the leader will): every node handed that config tries it.
 */
export interface ConfigTryRecord {
  pool: string;
  /** The try's timeout as given ("5m"); the checks are the pool's (effectiveTry). */
  timeout: string;
  requestedBy: string;
  requestedAt: number;
}

/** `mcctl confirm`: the node's try of `config` is confirmed; deleted once its stream delivers it (as ReapplyRequest). */
export interface TryConfirmationRecord {
  config: string;
  requestedBy: string;
  requestedAt: number;
}

export interface ReapplyRequestRecord {
  requestedBy: string;
  requestedAt: number;
}

export interface ReplicaRecord {
  address: string;
  version: string;
  startedAt: number;
  heartbeatAt: number;
  agents: number;
}

export interface LeaderRecord {
  replica: string;
  since: number;
}

/** The one election record's name. */
export const LEADER_KEY = 'leader';

/** A single-use enrollment token, stored under the SHA-256 of the token. */
export interface EnrollmentTokenRecord {
  pool: string;
  issuedAt: number;
  expiresAt: number;
  usedBy?: string;
  usedAt?: number;
  /**
   * The bootstrap token that paid for it: a stored token's id, or `file:<SHA-256>` for one from
   * the server's token file. Refused (and collected) once that token is deleted or expires.
   * Absent on tokens issued before it was recorded: those live out their TTL.
   */
  mintedBy?: string;
}

/** Where an enrollment request stands. */
export type EnrollmentRequestState = 'Pending' | 'Approved' | 'Denied';

/**
 * A host's request to join without a bootstrap token (POST /enrollment-requests), stored under
 * its id: the SHA-256 (hex) of the host's public key, so a retry with the same key finds it and
 * only the key's holder could have made it (the CSR is signed). Written by the bootstrap endpoint
 * (the request, an auto-approval, the lazy signature) and by the operator's decision (gRPC);
 * each write is a compare-and-swap on the request, so a decision is made once.
 */
export interface EnrollmentRequestRecord {
  nodeName: string;
  pool: string;
  /** The host's PKCS#10 request (PEM): what approval signs. */
  csr: string;
  /** What the host says about itself, for the operator to judge; never the node's labels. */
  labels?: Record<string, string>;
  requestedAt: number;
  /** The client address the request came from. */
  address: string;
  state: EnrollmentRequestState;
  /** An operator's CN, or `auto-approve rule <pool>=<glob>`. */
  decidedBy?: string;
  decidedAt?: number;
  /** Why it was denied (or a note on an approval). */
  reason?: string;
  /**
   * The signed certificate (PEM), once approved and signed. An approval on a replica without the
   * CA key leaves it out; the bootstrap endpoint signs when the host next polls.
   */
  certificate?: string;
  /** When the collector deletes it: a pending one after the request TTL, a decided one a day after the decision. */
  expiresAt: number;
}

/**
 * A node's last updates, oldest first, at most MAX_HISTORY_UPDATES. One writer: the replica
 * holding the node's stream, each write fenced by its session epoch (as NodeStatus), and only
 * when an update finishes. Not cached: it is read when someone asks for it.
 */
export interface NodeHistoryRecord {
  updates: UpdateRecord[];
}

/** One event, as Kubernetes keeps them: repeats of the same one raise its count. Leader-written. */
export interface EventRecord {
  type: 'Normal' | 'Warning';
  reason: string;
  /** node/<name> or pool/<name>. */
  object: string;
  message: string;
  /** The pool the object belonged to when it happened ("" for none). */
  pool: string;
  firstTimestamp: number;
  lastTimestamp: number;
  count: number;
}

/** Where a drain stands. */
export type DrainPhase =
  /** Cordoned (or cordoning); evicting pods until none but DaemonSet and mirror pods remain. */
  | 'Draining'
  /** Drained and the hold cleared: the agent updates; uncordoned once it is Done on `config`. */
  | 'Drained';

/** A PodDisruptionBudget that refused an eviction, as the reason shows it. */
export interface DrainBlock {
  namespace: string;
  pod: string;
  /** The budget's name, when the refusal or a lookup named one. */
  budget: string;
  /** status.disruptionsAllowed of the budget when last read. */
  disruptionsAllowed: number | null;
  message: string;
}

/**
 * A drain of one node, written by the leader's drain controller only. It outlives a leader:
 * the next one reads it and goes on from where it stands, so a node is never released undrained.
 */
export interface NodeDrainRecord {
  /** The rendered config the drain is for (the node's desiredConfig when it started). */
  config: string;
  phase: DrainPhase;
  /** Clock time the drain started (timeouts and NodeDrainStalled count from here). */
  startedAt: number;
  /** Clock time the node was found empty and its config released (phase Drained). */
  drainedAt?: number;
  /** True once mcplane set spec.unschedulable (it uncordons only what it cordoned). */
  cordoned: boolean;
  /** The node was already cordoned by someone else before the drain: leave it cordoned after. */
  wasCordoned: boolean;
  /** How many times someone uncordoned the node during the drain and mcplane cordoned it again. */
  recordoned: number;
  /** Eviction rounds so far. */
  attempt: number;
  /** Eviction rounds in a row that were refused or failed. */
  refusals: number;
  /** Evictions that failed other than by a budget (namespace/name: message). */
  failures?: string[];
  /** Clock time of the next eviction round, when one is scheduled after a refusal. */
  nextRetryAt?: number;
  /** Pods still on the node that the drain waits for (first few, namespace/name). */
  remaining: string[];
  blocked?: DrainBlock;
  /** The drain ran past the pool's drain timeout. */
  timedOut?: boolean;
  /** The pool says a drain past its timeout degrades the node. */
  degraded?: boolean;
  /** What the node's reason says about the drain, kept current by the controller. */
  reason: string;
}

/** A Kubernetes Node as the leader last saw it, synced from the cluster's watch. */
export interface KubernetesNodeRecord {
  labels: Record<string, string>;
  /** metadata.creationTimestamp in Unix ms: the node's registration time with a cluster. */
  createdAt: number;
  /** spec.unschedulable (cordoned). */
  unschedulable: boolean;
  /** The machineconfiguration.openshift.io/ annotations on the Node, as last seen. */
  annotations: Record<string, string>;
  uid: string;
}

/** The one KubernetesSource record's name. */
export const KUBERNETES_SOURCE_KEY = 'cluster';

/** A cluster object the source controller could not take, and why (Apply's validation). */
export interface SourceObjectProblems {
  /** A MachineConfig, a pool, or a higher-level config (KubeletConfig, mirror set, ...). */
  kind: ImportedKind;
  name: string;
  /** The object's labels as the cluster has them, to find the pools a bad config would feed. */
  labels: Record<string, string>;
  uid: string;
  generation: number;
  problems: Problem[];
}

/** Written by the leader's Kubernetes source controller (--kubernetes-source) only. */
export interface KubernetesSourceRecord {
  /** Objects left out of the store (their last good version, if any, stays), sorted by kind and name. */
  invalid: SourceObjectProblems[];
}

/**
 * `mcctl resume pool` on a pool the circuit breaker halted. Written by the API for the operator,
 * deleted by the leader's rollout controller once it has cleared the halt (one writer each way,
 * as ReapplyRequest).
 */
export interface PoolResumeRecord {
  /** The halted target the operator resumed past. */
  target: string;
  requestedAt: number;
}

/**
 * One write through the API, allowed or refused (audit-trail.ts). Stored under a name that sorts
 * by time: the milliseconds, zero-padded, then a random suffix.
 */
export interface AuditRecordValue {
  at: number;
  subject: string;
  serial: string;
  /** viewer | operator | admin, or none (a certificate of no API role, e.g. a node's). */
  role: string;
  pools: string[];
  peer: string;
  /** Service/Method, e.g. ConfigService/SetPoolPaused. */
  method: string;
  objects: { kind: string; name: string }[];
  /** OK or the gRPC status name. */
  result: string;
  message?: string;
  replica: string;
}

/** The value stored under each kind the control plane writes itself. */
interface ControlPlaneValues {
  PoolStatus: PoolStatusRecord;
  RenderedConfig: StoredRendered;
  Node: NodeRecordValue;
  NodeAssignment: NodeAssignmentRecord;
  NodeStatus: NodeStatusRecord;
  AgentSession: AgentSessionRecord;
  ReapplyRequest: ReapplyRequestRecord;
  TryConfirmation: TryConfirmationRecord;
  ConfigTry: ConfigTryRecord;
  Replica: ReplicaRecord;
  Leader: LeaderRecord;
  EnrollmentToken: EnrollmentTokenRecord;
  BootstrapToken: BootstrapTokenRecord;
  RevokedCertificate: RevokedCertificateRecord;
  NodeGeneration: NodeGenerationRecord;
  NodeHistory: NodeHistoryRecord;
  Event: EventRecord;
  NodeDrain: NodeDrainRecord;
  KubernetesNode: KubernetesNodeRecord;
  KubernetesSource: KubernetesSourceRecord;
  PoolResume: PoolResumeRecord;
  EnrollmentRequest: EnrollmentRequestRecord;
  AuditRecord: AuditRecordValue;
}

/**
 * The value stored under each kind: what its parser makes for the kinds users write (the
 * catalogue's), the record types above for the rest. A stored kind missing here is a type error
 * at StoredValue, so a new kind cannot be read untyped.
 */
export type StoredValues = { [K in UserKind]: ParsedValue<K> } & ControlPlaneValues;

/** The value type of stored objects of `K`: `store.get('KubeletConfig', n)` is a KubeletConfig. */
export type StoredValue<K extends StoredKind> = StoredValues[K];
