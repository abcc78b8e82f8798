// Every kind of object the control plane stores, in one registry: who writes it, whether every
// replica's cache holds it, whether it is part of a node's joined view, and whether deleting a
// node deletes it. The kind union, the etcd key space, the cache's kinds and `mcctl delete node`
// are derived from here, so adding a stored kind is one entry. The API kinds (MachineConfig,
// the higher-level configs, Node, ...) come from the catalogue (machineconfig/api-kinds.ts): only
// what the control plane adds to them is said here.

import { API_KINDS, USER_KINDS, type UserKind } from '../../machineconfig/api-kinds.ts';

export interface KindInfo {
  /** Who writes it: each kind has one writer. */
  readonly writer: 'user' | 'leader' | 'stream holder' | 'replica' | 'election' | 'operator' | 'bootstrap endpoint';
  /** What it holds. */
  readonly holds: string;
  /** Held in every replica's cache (else read from the store when used). */
  readonly cached: boolean;
  /** One of the records a node's joined view (NodeView) is made of. */
  readonly nodeView?: true;
  /** Deleted with its node (`mcctl delete node`). */
  readonly deletedWithNode?: true;
}

/**
 * The kinds users write through Apply (the catalogue's): few, small, and read by every apply and
 * render, so cached.
 */
const USER_WRITTEN = Object.fromEntries(USER_KINDS.map((k) => [k, { writer: 'user', holds: API_KINDS[k].holds, cached: true }])) as Record<UserKind, KindInfo & { writer: 'user'; cached: true }>;

export const KINDS = {
  ...USER_WRITTEN,
  PoolStatus: { writer: 'leader', holds: 'a pool\'s target and conditions, kept apart from the user\'s spec', cached: true },
  RenderedConfig: { writer: 'leader', holds: 'a rendered config', cached: true },
  Node: { writer: API_KINDS.Node.writer, holds: API_KINDS.Node.holds, cached: true, nodeView: true, deletedWithNode: true },
  NodeAssignment: { writer: 'leader', holds: 'what the leader wants of a node: its pool and desired config', cached: true, nodeView: true, deletedWithNode: true },
  NodeStatus: { writer: 'stream holder', holds: 'what the node\'s agent last reported', cached: true, nodeView: true, deletedWithNode: true },
  AgentSession: { writer: 'stream holder', holds: 'a live agent stream on some replica; attached to that replica\'s lease', cached: true, nodeView: true, deletedWithNode: true },
  // Written with the Apply's MachineConfigs, before the leader renders the config it names; the
  // leader deletes it once neither the pool's target nor any node's assignment is that config.
  ConfigTry: { writer: 'operator', holds: 'an `mcctl apply --try`: the rendered config that Apply produces is tried with its timeout on every node it reaches', cached: true },
  TryConfirmation: { writer: 'operator', holds: 'an operator\'s `mcctl confirm` of a node\'s try, until its stream delivers it', cached: true, deletedWithNode: true },
  ReapplyRequest: { writer: 'operator', holds: 'an operator\'s request to re-apply a node\'s config, until its stream delivers it', cached: true, deletedWithNode: true },
  Replica: { writer: 'replica', holds: 'a running mcplane-server; attached to its lease', cached: true },
  Leader: { writer: 'election', holds: 'the leader election record; attached to the leader\'s lease', cached: true },
  EnrollmentToken: { writer: 'bootstrap endpoint', holds: 'a one-time enrollment token (read when used, not cached)', cached: false },
  BootstrapToken: { writer: 'operator', holds: 'a pool-scoped bootstrap token (mcctl pki token create), under its public id', cached: true },
  RevokedCertificate: { writer: 'operator', holds: 'a certificate no replica accepts any more (mcctl node revoke, mcctl delete node)', cached: true },
  // Not deleted with its node: it is what keeps a deleted node's older certificates out.
  NodeGeneration: { writer: 'operator', holds: 'a node name\'s certificate generation, raised by mcctl node revoke and mcctl delete node: certificates of an older one are refused', cached: true },
  NodeHistory: { writer: 'stream holder', holds: 'a node\'s last updates (bounded), fenced by the session epoch; read when asked for', cached: false, deletedWithNode: true },
  Event: { writer: 'leader', holds: 'what happened (mcctl get events), bounded and expiring', cached: true },
  NodeDrain: { writer: 'leader', holds: 'a drain in progress on a Kubernetes Node, so a new leader resumes it', cached: true, nodeView: true },
  KubernetesNode: { writer: 'leader', holds: 'the leader\'s copy of a Kubernetes Node (labels, creation time, cordon, MCO annotations)', cached: true, nodeView: true },
  KubernetesSource: { writer: 'leader', holds: 'with --kubernetes-source: what the source controller found wrong with the cluster\'s objects (one record, `cluster`)', cached: true },
  PoolResume: { writer: 'operator', holds: 'an operator\'s `mcctl resume pool` past a rollout halt, until the leader clears the halt', cached: true },
  // Bounded (pending ones by the endpoint's limit, decided ones expire): cached, so listing and
  // the pending count cost no store read.
  EnrollmentRequest: { writer: 'bootstrap endpoint', holds: 'a host\'s request to join without a bootstrap token, and the operator\'s decision on it', cached: true },
  // Written by whichever replica answered the call; read only by `mcctl get audit` (from the
  // store), so no replica holds them in memory. Bounded by count and age (audit-trail.ts).
  AuditRecord: { writer: 'replica', holds: 'one write through the API, or a refused one: who, when, from where, what, the result (mcctl get audit)', cached: false },
} as const satisfies Record<string, KindInfo>;

export type StoredKind = keyof typeof KINDS;

/** The kinds held in every replica's cache: the ones ClusterCache.objects can read. */
export type CachedKind = { [K in StoredKind]: (typeof KINDS)[K] extends { cached: true } ? K : never }[StoredKind];

export const STORED_KINDS = Object.keys(KINDS) as StoredKind[];

const kindsWhere = (has: (info: KindInfo) => boolean): StoredKind[] => STORED_KINDS.filter((k) => has(KINDS[k]));

/** The kinds every replica's cache holds. */
export const CACHED_KINDS: readonly StoredKind[] = kindsWhere((k) => k.cached);

/** The kinds whose objects together make one node's view. */
export const NODE_VIEW_KINDS: ReadonlySet<StoredKind> = new Set(kindsWhere((k) => k.nodeView === true));

/** The kinds deleted with their node. */
export const DELETED_WITH_NODE: readonly StoredKind[] = kindsWhere((k) => k.deletedWithNode === true);
