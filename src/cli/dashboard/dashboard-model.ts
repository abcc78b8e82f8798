// What the dashboard page shows, computed from Watch events in mcctl rather than in the
// browser: one place decides which progress bucket a node is in, and the page's script only
// draws what it is sent. No I/O here, so the rules are testable without a browser.

import type { MachineConfigPool__Output } from '../../runtime/generated/mcplane/v1/MachineConfigPool.ts';
import type { Node__Output } from '../../runtime/generated/mcplane/v1/Node.ts';
import type { WatchEvent__Output } from '../../runtime/generated/mcplane/v1/WatchEvent.ts';
import { FAILED_NODE_STATES } from '../../machineconfig/index.ts';

/**
 * A node's place in its pool's rollout, the segments of the progress bar. One bucket per node,
 * in this order of precedence: a degraded node is degraded even when also disconnected (its
 * reason matters most), and a disconnected node is not counted as making progress.
 */
export const BUCKETS = ['degraded', 'disconnected', 'updating', 'waiting', 'updated'] as const;
export type NodeBucket = (typeof BUCKETS)[number];

export function nodeBucket(n: Node__Output, poolTarget: string | undefined): NodeBucket {
  const s = n.status;
  // A node whose health gate or try failed (RolledBack, TryReverted) reports the config it left as
  // desired: failed, not updating.
  if (s && FAILED_NODE_STATES.has(s.state)) return 'degraded';
  if (s && !s.connected) return 'disconnected';
  // Assigned a config it has not reached: at work, or about to start.
  if (s?.state === 'Working' || (!!s?.desiredConfig && s.desiredConfig !== s.currentConfig)) return 'updating';
  if (poolTarget && s?.currentConfig === poolTarget) return 'updated';
  // Not on the pool's target and not assigned it yet (maxUnavailable, a paused pool), or the
  // pool has no rendered config to be on.
  return 'waiting';
}

export interface DashboardNode {
  name: string;
  pool: string;
  state: string;
  phase: string;
  reason: string;
  bucket: NodeBucket;
  connected: boolean;
  currentConfig: string;
  desiredConfig: string;
  zone: string;
  agentVersion: string;
  lastSeenMs: number;
  /** When the node entered its current state and phase (ms since the epoch). */
  phaseSinceMs: number;
  /**
   * False when the phase began before this dashboard first saw the node: the server does not
   * report when a phase started, so the time shown is then a lower bound ("≥ 3m").
   */
  phaseSinceExact: boolean;
}

export interface DashboardPool {
  name: string;
  target: string;
  paused: boolean;
  maxUnavailable: string;
  machineCount: number;
  updatedMachineCount: number;
  /** Nodes of the pool in each bucket, as the bar shows them. */
  counts: Record<NodeBucket, number>;
  /** The pool's degraded conditions that are True (RenderDegraded, NodeDegraded), with their messages. */
  alerts: { type: string; message: string }[];
}

export interface DashboardUpdate {
  pools: DashboardPool[];
  nodes: DashboardNode[];
  deletedPools: string[];
  deletedNodes: string[];
}

// Degraded itself only repeats these two (MCO's rule), so it is left out.
const ALERT_CONDITIONS = ['RenderDegraded', 'NodeDegraded'];

export class DashboardModel {
  readonly #pools = new Map<string, MachineConfigPool__Output>();
  readonly #nodes = new Map<string, Node__Output>();
  readonly #views = new Map<string, DashboardNode>();
  readonly #dirtyPools = new Set<string>();
  readonly #dirtyNodes = new Set<string>();
  readonly #deletedPools = new Set<string>();
  readonly #deletedNodes = new Set<string>();

  private readonly now: () => number;
  constructor(now: () => number = Date.now) {
    this.now = now;
  }

  /** The full state after (re)connecting: what is gone since the last one counts as deleted. */
  applySnapshot(events: WatchEvent__Output[]): void {
    const pools = new Set<string>();
    const nodes = new Set<string>();
    for (const e of events) {
      if (e.pool) pools.add(e.pool.name);
      if (e.node) nodes.add(e.node.name);
    }
    for (const name of [...this.#pools.keys()]) if (!pools.has(name)) this.#deletePool(name);
    for (const name of [...this.#nodes.keys()]) if (!nodes.has(name)) this.#deleteNode(name);
    for (const e of events) this.#upsert(e, false);
  }

  applyChange(e: WatchEvent__Output): void {
    if (e.type === 'DELETED') {
      if (e.pool) this.#deletePool(e.pool.name);
      if (e.node) this.#deleteNode(e.node.name);
      return;
    }
    this.#upsert(e, true);
  }

  /** Everything, for a page that just connected. */
  snapshot(): { pools: DashboardPool[]; nodes: DashboardNode[] } {
    return {
      pools: [...this.#pools.keys()].sort().map((name) => this.#poolView(name)),
      nodes: [...this.#views.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
    };
  }

  /** What changed since the last call, or undefined when nothing did. */
  takeUpdate(): DashboardUpdate | undefined {
    if (!this.#dirtyPools.size && !this.#dirtyNodes.size && !this.#deletedPools.size && !this.#deletedNodes.size) return undefined;
    const update: DashboardUpdate = {
      pools: [...this.#dirtyPools].filter((n) => this.#pools.has(n)).sort().map((n) => this.#poolView(n)),
      nodes: [...this.#dirtyNodes].map((n) => this.#views.get(n)).filter((v): v is DashboardNode => !!v),
      deletedPools: [...this.#deletedPools],
      deletedNodes: [...this.#deletedNodes],
    };
    this.#dirtyPools.clear();
    this.#dirtyNodes.clear();
    this.#deletedPools.clear();
    this.#deletedNodes.clear();
    return update;
  }

  /** `live`: a change as it happened, so a new phase starts now (not one seen in a snapshot). */
  #upsert(e: WatchEvent__Output, live: boolean): void {
    if (e.pool) {
      const before = this.#pools.get(e.pool.name)?.status?.configuration;
      this.#pools.set(e.pool.name, e.pool);
      this.#deletedPools.delete(e.pool.name);
      this.#dirtyPools.add(e.pool.name);
      // A new target moves every node of the pool between "updated" and "waiting".
      if (before !== e.pool.status?.configuration) {
        for (const n of this.#nodes.values()) if (n.pool === e.pool.name) this.#refreshNode(n, live);
      }
    }
    if (e.node) {
      const previous = this.#nodes.get(e.node.name);
      if (previous && previous.pool !== e.node.pool) this.#dirtyPools.add(previous.pool);
      this.#nodes.set(e.node.name, e.node);
      this.#deletedNodes.delete(e.node.name);
      this.#refreshNode(e.node, live);
    }
  }

  #refreshNode(n: Node__Output, live: boolean): void {
    const s = n.status;
    const previous = this.#views.get(n.name);
    const state = s?.state ?? '';
    const phase = s?.phase ?? '';
    const desiredConfig = s?.desiredConfig ?? '';
    const samePhase = previous && previous.state === state && previous.phase === phase && previous.desiredConfig === desiredConfig;
    const view: DashboardNode = {
      name: n.name,
      pool: n.pool,
      state,
      phase,
      reason: s?.reason ?? '',
      bucket: nodeBucket(n, this.#pools.get(n.pool)?.status?.configuration || undefined),
      connected: s?.connected ?? false,
      currentConfig: s?.currentConfig ?? '',
      desiredConfig,
      zone: n.labels?.['topology.kubernetes.io/zone'] ?? '',
      agentVersion: s?.agentVersion ?? '',
      lastSeenMs: s?.lastSeenUnixMs ?? 0,
      phaseSinceMs: samePhase ? previous.phaseSinceMs : this.now(),
      // A change seen on the live stream starts the clock exactly; a node first met in a
      // snapshot (or changed while the stream was down) was in this phase for some time already.
      phaseSinceExact: samePhase ? previous.phaseSinceExact : live,
    };
    // The agent's update timeline says when the running phase began (its clock): exact even for
    // a node first met in a snapshot.
    const running = s?.currentUpdate?.phases?.at(-1);
    if (running && running.name === phase && Number(running.endedUnixMs) === 0 && Number(running.startedUnixMs) > 0) {
      view.phaseSinceMs = Number(running.startedUnixMs);
      view.phaseSinceExact = true;
    }
    this.#views.set(n.name, view);
    this.#dirtyNodes.add(n.name);
    this.#dirtyPools.add(n.pool);
  }

  #deletePool(name: string): void {
    if (!this.#pools.delete(name)) return;
    this.#dirtyPools.delete(name);
    this.#deletedPools.add(name);
  }

  #deleteNode(name: string): void {
    const n = this.#nodes.get(name);
    if (!n) return;
    this.#nodes.delete(name);
    this.#views.delete(name);
    this.#dirtyNodes.delete(name);
    this.#deletedNodes.add(name);
    this.#dirtyPools.add(n.pool);
  }

  #poolView(name: string): DashboardPool {
    const p = this.#pools.get(name)!;
    const counts = Object.fromEntries(BUCKETS.map((b) => [b, 0])) as Record<NodeBucket, number>;
    for (const v of this.#views.values()) if (v.pool === name) counts[v.bucket]++;
    return {
      name,
      target: p.status?.configuration ?? '',
      paused: p.paused,
      maxUnavailable: p.maxUnavailable,
      machineCount: p.status?.machineCount ?? 0,
      updatedMachineCount: p.status?.updatedMachineCount ?? 0,
      counts,
      alerts: (p.status?.conditions ?? [])
        .filter((c) => c.status === 'True' && ALERT_CONDITIONS.includes(c.type))
        .map((c) => ({ type: c.type, message: c.message || c.reason })),
    };
  }
}
