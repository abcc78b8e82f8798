// Every replica's view of the store: listed once, then kept current only by the store's watch
// (an informer, in Kubernetes' words), this replica's own writes included. Nothing here runs
// ahead of the store: a write becomes visible when its watch event arrives, and writers that
// must read their own writes wait for that revision (waitForRevision). A compacted watch
// revision leads to a full relist, never to missed events.

import { EventEmitter } from 'node:events';
import {
  CLUSTER_MACHINE_CONFIGURATION,
  poolSelectionLabels,
  StoreUnavailableError,
  type NodeRecord,
  type NodeStatus,
  type RenderedConfig,
} from '../../machineconfig/index.ts';
import { SOURCE_KINDS, type SourceKind } from '../../machineconfig/api-kinds.ts';
import type { SourceObject } from '../../machineconfig/generated-configs.ts';
import type { Logger } from '../../runtime/logger.ts';
import { displayedStatus } from './displayed-node-status.ts';
import type { ChangeEvent, Store, StoredKind, StoredObject } from '../store/store.ts';
import { CACHED_KINDS, NODE_VIEW_KINDS, type CachedKind } from '../store/kinds.ts';
import {
  KUBERNETES_SOURCE_KEY,
  LEADER_KEY,
  type NodeDrainRecord,
  type NodeRecordValue,
  type StoredValue,
} from '../store/stored-records.ts';

/** The stored kinds of the higher-level configs: the catalogue's source kinds. */
export const SOURCE_STORED_KINDS: readonly (SourceKind & StoredKind)[] = SOURCE_KINDS;

/** The kinds whose objects together make one node's view. */
export const NODE_KINDS = NODE_VIEW_KINDS;

/** The kinds a pool's nodes and their states are made of, with the pool's spec and status. */
const POOL_AND_NODE_KINDS: readonly StoredKind[] = ['PoolStatus', 'MachineConfigPool', 'NodeAssignment', 'NodeStatus', 'AgentSession', 'Node', 'NodeDrain', 'KubernetesNode', 'PoolResume'];

/** Whether a change can alter any pool's nodes, their states, or the pool itself. */
export function changesPoolsOrNodes(change: CacheChange): boolean {
  return POOL_AND_NODE_KINDS.some((k) => change.changed.has(k));
}

export interface CacheChange {
  revision: number;
  /** The names that changed, per kind. */
  changed: Map<StoredKind, Set<string>>;
  /** Names of nodes whose joined view changed, was added or was removed. */
  nodes: Set<string>;
  /** The cache was (re)listed: anything may have changed. */
  resync: boolean;
}

/** A node as every reader sees it: identity, the leader's decisions and the agent's report. */
export interface NodeView extends NodeRecord {
  poolError?: string;
  enrolledFor?: string;
  /** Labels its agent asked for and did not get (NodeRestriction). */
  ignoredLabels?: Record<string, string>;
  /**
   * The labels that may choose its pool: none the host could have set for itself (its agent's
   * report, or on a cluster what a kubelet may set on its own Node).
   */
  poolLabels: Record<string, string>;
  /** The highest revision among the node's objects: changes whenever the view does. */
  resourceVersion: string;
  /** The replica holding the node's agent stream, when connected. */
  replica?: string;
  /** The leader's drain of the node's Kubernetes Node, while one runs. */
  drain?: NodeDrainRecord;
  /** True when a Kubernetes Node of this name exists (labels and registeredAt come from it). */
  kubernetesNode?: boolean;
  /** The certificate on the node's record (the one it last registered or enrolled with). */
  certificate?: NodeRecordValue['certificate'];
}

export const EMPTY_NODE_STATUS: NodeStatus = {
  currentConfig: '', desiredConfig: '', state: 'Done', phase: '', reason: '', drift: [], os: null,
  bootId: '', agentVersion: '', lastDisruption: '',
};

const DEFAULT_WAIT_MS = 10_000;

export class ClusterCache extends EventEmitter<{ change: [CacheChange] }> {
  #objects = new Map<StoredKind, Map<string, StoredObject>>();
  #nodes = new Map<string, NodeView>();
  /** nodesInPool's answers, until a node changes. */
  readonly #poolNodes = new Map<string, readonly NodeView[]>();
  #sortedNodeNames: string[] | undefined;
  #specJson = new Map<string, string>();
  #revision = 0;
  #waiters: { revision: number; resolve: () => void }[] = [];
  #unwatch: (() => void) | undefined;
  #stopped = false;

  readonly store: Store;
  private readonly log: Logger;
  private constructor(store: Store, log: Logger) {
    super();
    this.store = store;
    this.log = log;
    this.setMaxListeners(0);
    for (const kind of CACHED_KINDS) this.#objects.set(kind, new Map());
  }

  static async start(store: Store, log: Logger): Promise<ClusterCache> {
    const cache = new ClusterCache(store, log);
    await cache.#relist();
    return cache;
  }

  get revision(): number {
    return this.#revision;
  }

  // ---- typed views ---------------------------------------------------------------------------

  /**
   * The cached objects of `kind`, typed as that kind's value (`objects('KubeletConfig')` holds
   * KubeletConfigs). Every typed view below is this with a name callers read better.
   */
  objects<K extends CachedKind>(kind: K): ReadonlyMap<string, StoredObject<StoredValue<K>>> {
    // The one place values meet their type: each map holds only objects of its own kind.
    return this.#objects.get(kind) as Map<string, StoredObject<StoredValue<K>>>;
  }

  get configs() { return this.objects('MachineConfig'); }
  get pools() { return this.objects('MachineConfigPool'); }
  get poolStatuses() { return this.objects('PoolStatus'); }
  get rendered() { return this.objects('RenderedConfig'); }
  get nodeRecords() { return this.objects('Node'); }
  get assignments() { return this.objects('NodeAssignment'); }
  get nodeStatuses() { return this.objects('NodeStatus'); }
  get sessions() { return this.objects('AgentSession'); }
  get reapplyRequests() { return this.objects('ReapplyRequest'); }
  get tryConfirmations() { return this.objects('TryConfirmation'); }
  get configTries() { return this.objects('ConfigTry'); }
  get poolResumes() { return this.objects('PoolResume'); }
  get replicas() { return this.objects('Replica'); }
  get events() { return this.objects('Event'); }
  get leader() { return this.objects('Leader').get(LEADER_KEY); }
  /** MachineConfiguration/cluster, the cluster-wide disruption policy, when one was applied. */
  get machineConfiguration() { return this.objects('MachineConfiguration').get(CLUSTER_MACHINE_CONFIGURATION); }
  get drains() { return this.objects('NodeDrain'); }
  get kubernetesNodes() { return this.objects('KubernetesNode'); }
  get bootstrapTokens() { return this.objects('BootstrapToken'); }
  /** Keyed by the id: the SHA-256 of the requesting host's public key. */
  get enrollmentRequests() { return this.objects('EnrollmentRequest'); }
  /** Keyed by the certificate's SHA-256 fingerprint. */
  get revokedCertificates() { return this.objects('RevokedCertificate'); }
  /** Keyed by node name; a name without one is at generation 0. */
  get nodeGenerations() { return this.objects('NodeGeneration'); }
  /** The certificate generation node certificates for `node` are issued at, and accepted from. */
  nodeGeneration(node: string): number { return this.nodeGenerations.get(node)?.value.generation ?? 0; }
  /** With --kubernetes-source: the cluster objects the leader could not take, and why. */
  get kubernetesSource() { return this.objects('KubernetesSource').get(KUBERNETES_SOURCE_KEY); }

  /** Every stored higher-level config (the catalogue's source kinds). */
  get sources(): StoredObject<SourceObject>[] {
    return SOURCE_KINDS.flatMap((k) => [...this.sourcesOf(k).values()]);
  }

  sourcesOf(kind: SourceKind): ReadonlyMap<string, StoredObject<SourceObject>> { return this.objects(kind); }

  get nodes(): ReadonlyMap<string, NodeView> {
    return this.#nodes;
  }

  /** Node names in order, for paged lists. */
  sortedNodeNames(): readonly string[] {
    this.#sortedNodeNames ??= [...this.#nodes.keys()].sort();
    return this.#sortedNodeNames;
  }

  /**
   * The pool's machines: its nodes that have registered at least once. A host enrolled (or
   * approved) that never connected is listed as a node, but is no machine of the pool yet: counted,
   * one phantom from an anonymous auto-approved request took maxUnavailable=1 and held the rollout.
   */
  nodesInPool(pool: string): readonly NodeView[] {
    // Kept until a node changes: the rollout, pool status and metrics each ask for it after the
    // same change, and each asking walked every node of the fleet.
    const known = this.#poolNodes.get(pool);
    if (known) return known;
    const out: NodeView[] = [];
    const records = this.nodeRecords;
    for (const n of this.#nodes.values()) if (n.pool === pool && records.get(n.name)?.value.registered !== false) out.push(n);
    Object.freeze(out);
    this.#poolNodes.set(pool, out);
    return out;
  }

  /** The pool's stored target, "" before its first render. */
  poolTarget(pool: string): string {
    return this.poolStatuses.get(pool)?.value.target ?? '';
  }

  renderedConfig(name: string): RenderedConfig | undefined {
    const o = this.rendered.get(name);
    if (!o) return undefined;
    // Rendered configs never change, so the serialization is made once, not once per node a
    // fan-out assigns it to. JSON round trips keep key order: it is the text the hash covered.
    let specJson = this.#specJson.get(name);
    if (specJson === undefined) {
      specJson = JSON.stringify(o.value.spec);
      this.#specJson.set(name, specJson);
    }
    return { ...o.value, specJson };
  }

  // ---- consistency ---------------------------------------------------------------------------

  /** Resolves once the cache has seen every change up to `revision` (a commit's, usually). */
  waitForRevision(revision: number, timeoutMs = DEFAULT_WAIT_MS): Promise<void> {
    if (this.#revision >= revision) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        reject(new StoreUnavailableError(`the store's watch did not deliver revision ${revision} within ${timeoutMs} ms (this replica has seen ${this.#revision})`));
      }, timeoutMs);
      const waiter = { revision, resolve: () => { clearTimeout(timer); resolve(); } };
      this.#waiters.push(waiter);
    });
  }

  stop(): void {
    this.#stopped = true;
    this.#unwatch?.();
  }

  // ---- the informer --------------------------------------------------------------------------

  async #relist(): Promise<void> {
    const { items, revision } = await this.store.list(CACHED_KINDS);
    for (const map of this.#objects.values()) map.clear();
    this.#specJson.clear();
    for (const o of items) this.#objects.get(o.kind)?.set(o.name, o);
    this.#nodes.clear();
    this.#poolNodes.clear();
    for (const name of this.nodeRecords.keys()) this.#rebuildNode(name);
    this.#sortedNodeNames = undefined;
    this.#revision = revision;
    this.#unwatch = this.store.watch(revision, {
      onEvents: (events, rev) => this.#apply(events, rev),
      onCompacted: (compacted) => {
        if (this.#stopped) return;
        this.log.warn({ from: this.#revision, compacted }, 'store watch fell behind a compaction; listing everything again');
        void this.#relistUntilDone();
      },
    });
    this.#release();
    this.emit('change', { revision, changed: new Map(), nodes: new Set(this.#nodes.keys()), resync: true });
  }

  async #relistUntilDone(): Promise<void> {
    for (let attempt = 1; !this.#stopped; attempt++) {
      try {
        await this.#relist();
        return;
      } catch (err) {
        this.log.error({ err, attempt }, 'relisting the store failed; retrying');
        await new Promise((r) => setTimeout(r, Math.min(5000, 200 * attempt)));
      }
    }
  }

  #apply(events: ChangeEvent[], revision: number): void {
    const changed = new Map<StoredKind, Set<string>>();
    const nodes = new Set<string>();
    for (const { type, object } of events) {
      const map = this.#objects.get(object.kind);
      if (!map) continue;
      if (type === 'put') map.set(object.name, object);
      else map.delete(object.name);
      if (object.kind === 'RenderedConfig' && type === 'delete') this.#specJson.delete(object.name);
      let names = changed.get(object.kind);
      if (!names) changed.set(object.kind, (names = new Set()));
      names.add(object.name);
      if (NODE_KINDS.has(object.kind)) nodes.add(object.name);
    }
    for (const name of nodes) this.#rebuildNode(name);
    if (nodes.size > 0) this.#poolNodes.clear();
    this.#revision = revision;
    this.#release();
    if (changed.size) this.emit('change', { revision, changed, nodes, resync: false });
  }

  #release(): void {
    const ready = this.#waiters.filter((w) => w.revision <= this.#revision);
    if (ready.length === 0) return;
    this.#waiters = this.#waiters.filter((w) => w.revision > this.#revision);
    for (const w of ready) w.resolve();
  }

  /** Joins a node's objects into one immutable view (readers may keep it while it changes). */
  #rebuildNode(name: string): void {
    const record = this.nodeRecords.get(name);
    if (!record) {
      if (this.#nodes.delete(name)) this.#sortedNodeNames = undefined;
      return;
    }
    const assignment = this.assignments.get(name);
    const status = this.nodeStatuses.get(name);
    const session = this.sessions.get(name);
    const drain = this.drains.get(name);
    // With a cluster, its Node object says what the node is (labels, age); the agent does not.
    const kube = this.kubernetesNodes.get(name);
    const revision = Math.max(...[record, assignment, status, session, drain, kube].map((o) => (o ? Number(o.resourceVersion) : 0)));
    const desiredConfig = assignment?.value.desiredConfig ?? '';
    const view: NodeView = {
      name,
      labels: kube ? kube.value.labels : record.value.labels,
      poolLabels: kube
        ? poolSelectionLabels(kube.value.labels, { kubernetes: true })
        : poolSelectionLabels(record.value.labels, { kubernetes: false, ...(record.value.reportedLabels ? { reported: record.value.reportedLabels } : {}) }),
      pool: assignment?.value.pool ?? '',
      registeredAt: kube ? kube.value.createdAt : record.createdAt,
      desiredConfig,
      // The agent's record stays its own; the view joins the leader's drain into what is shown.
      status: displayedStatus(status?.value.status ?? EMPTY_NODE_STATUS, desiredConfig, drain?.value, assignment?.value.drainNote),
      lastSeen: status?.value.lastSeen ?? 0,
      connected: session !== undefined,
      resourceVersion: String(revision),
    };
    if (assignment?.value.poolError) view.poolError = assignment.value.poolError;
    if (record.value.ignoredLabels) view.ignoredLabels = record.value.ignoredLabels;
    if (record.value.enrolledFor) view.enrolledFor = record.value.enrolledFor;
    if (record.value.certificate) view.certificate = record.value.certificate;
    if (session) view.replica = session.value.replica;
    if (drain) view.drain = drain.value;
    if (kube) view.kubernetesNode = true;
    if (!this.#nodes.has(name)) this.#sortedNodeNames = undefined;
    this.#nodes.set(name, view);
  }
}
