// The values the control plane keeps in the store, one type per StoredKind. Each kind has one
// writer, so replicas never fight over an object: the user (MachineConfig, MachineConfigPool),
// the leader (PoolStatus, RenderedConfig, NodeAssignment), the replica holding a node's stream
// (NodeStatus, AgentSession), each replica for itself (Replica), and the election (Leader).

import type { Labels, NodeStatus, PoolStatus, Problem, RenderedConfig, RolloutState } from '../machineconfig/index.ts';

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
}

/** The leader's decisions about a node. */
export interface NodeAssignmentRecord {
  /** The node's primary pool; "" when none selects it. */
  pool: string;
  /** Why the node has no pool, when it has none. */
  poolError?: string;
  /** The rendered config the node must run; "" until the rollout gives it one. */
  desiredConfig: string;
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
