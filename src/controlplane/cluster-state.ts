// The control plane's working set: every object held in memory, loaded from the store at start,
// and changed only through commit()/putNodes() so memory never runs ahead of disk. Node status
// reports are the one exception: agents report often, so reports update memory at once and are
// written in batches (a report lost to a crash is re-sent in full when the agent reconnects).
//
// One process owns the store. A distributed backend would add a store watch here to learn of
// other servers' writes; with SQLite there are none.

import { EventEmitter } from 'node:events';
import type { MachineConfig, MachineConfigPool, NodeRecord, RenderedConfig } from '../machineconfig/index.ts';
import type { Store, StoredKind, StoredObject, WriteOp } from './store/store.ts';

/** A pool as stored: the user's object plus the controller's choice of target. */
export interface PoolRecord {
  pool: MachineConfigPool;
  /** The rendered config the pool targets; "" before the first successful render. */
  target: string;
  targetSources: string[];
}

export type StoredRendered = Omit<RenderedConfig, 'specJson'>;

/** Persisted node fields; `connected` and the session live only in memory. */
export type StoredNode = Omit<NodeRecord, 'connected'> & { poolError?: string };

export interface NodeEntry extends NodeRecord {
  poolError?: string;
  resourceVersion: string;
}

export type StateChange = { kinds: Set<StoredKind>; nodes: Set<string>; pools: Set<string> };

export interface ClusterStateEvents {
  change: [StateChange];
}

const NODE_FLUSH_INTERVAL_MS = 100;

export class ClusterState extends EventEmitter<ClusterStateEvents> {
  readonly configs = new Map<string, StoredObject<MachineConfig>>();
  readonly pools = new Map<string, StoredObject<PoolRecord>>();
  readonly rendered = new Map<string, StoredObject<StoredRendered>>();
  readonly nodes = new Map<string, NodeEntry>();
  #dirtyNodes = new Set<string>();
  #flushTimer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();

  private constructor(readonly store: Store) {
    super();
  }

  static async load(store: Store): Promise<ClusterState> {
    const state = new ClusterState(store);
    for (const o of await store.list<MachineConfig>('MachineConfig')) state.configs.set(o.name, o);
    for (const o of await store.list<PoolRecord>('MachineConfigPool')) state.pools.set(o.name, o);
    for (const o of await store.list<StoredRendered>('RenderedConfig')) state.rendered.set(o.name, o);
    for (const o of await store.list<StoredNode>('Node')) {
      state.nodes.set(o.name, { ...o.value, connected: false, resourceVersion: o.resourceVersion });
    }
    return state;
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

  readonly #specJson = new Map<string, string>();

  nodesInPool(pool: string): NodeEntry[] {
    return [...this.nodes.values()].filter((n) => n.pool === pool);
  }

  /** Writes through the store, then updates memory and tells listeners. */
  async commit(ops: WriteOp[]): Promise<void> {
    const written = await this.store.commit(ops);
    const change: StateChange = { kinds: new Set(), nodes: new Set(), pools: new Set() };
    for (const op of ops) {
      change.kinds.add(op.kind);
      if (op.type === 'delete') this.#mapFor(op.kind)?.delete(op.name);
      if (op.type === 'delete' && op.kind === 'RenderedConfig') this.#specJson.delete(op.name);
      if (op.kind === 'Node') change.nodes.add(op.name);
      if (op.kind === 'MachineConfigPool') change.pools.add(op.name);
    }
    for (const o of written) {
      if (o.kind === 'Node') {
        // Nodes are changed in memory first (see putNode), so a status report that arrives
        // while this commit is in flight is never overwritten by an older snapshot.
        const existing = this.nodes.get(o.name);
        if (existing) existing.resourceVersion = o.resourceVersion;
        else this.nodes.set(o.name, { ...(o.value as StoredNode), connected: false, resourceVersion: o.resourceVersion });
      } else {
        this.#mapFor(o.kind)?.set(o.name, o as StoredObject<never>);
      }
    }
    this.emit('change', change);
  }

  /**
   * Changes nodes in memory and writes them durably now (registration, assignments). If the
   * write fails the in-memory change is undone, so memory does not run ahead of disk.
   */
  async putNodes(changes: { name: string; create?: NodeEntry; update?: (node: NodeEntry) => void }[]): Promise<void> {
    const undo: (() => void)[] = [];
    const ops: WriteOp[] = [];
    for (const { name, create, update } of changes) {
      const existing = this.nodes.get(name);
      if (!existing && create) {
        this.nodes.set(name, create);
        undo.push(() => this.nodes.delete(name));
      } else if (existing && update) {
        const before = structuredClone(toStoredNode(existing));
        update(existing);
        undo.push(() => Object.assign(existing, before));
      }
      const node = this.nodes.get(name);
      if (node) ops.push({ type: 'put', kind: 'Node', name, value: toStoredNode(node) });
    }
    try {
      await this.commit(ops);
    } catch (err) {
      for (const u of undo.reverse()) u();
      throw err;
    }
  }

  /** Updates a node in memory now and persists it with the next batch. */
  updateNode(name: string, update: (node: NodeEntry) => void): NodeEntry | undefined {
    const node = this.nodes.get(name);
    if (!node) return undefined;
    update(node);
    this.#dirtyNodes.add(name);
    this.#flushTimer ??= setTimeout(() => void this.flushNodes(), NODE_FLUSH_INTERVAL_MS);
    this.emit('change', { kinds: new Set(['Node']), nodes: new Set([name]), pools: new Set(node.pool ? [node.pool] : []) });
    return node;
  }

  /** Writes every node changed since the last flush, in one transaction. */
  flushNodes(): Promise<void> {
    clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    const names = [...this.#dirtyNodes];
    this.#dirtyNodes.clear();
    if (names.length === 0) return this.#flushing;
    const ops: WriteOp[] = [];
    for (const name of names) {
      const node = this.nodes.get(name);
      if (node) ops.push({ type: 'put', kind: 'Node', name, value: toStoredNode(node) });
    }
    this.#flushing = this.#flushing.then(async () => {
      const written = await this.store.commit(ops);
      for (const o of written) {
        const node = this.nodes.get(o.name);
        if (node) node.resourceVersion = o.resourceVersion;
      }
    });
    return this.#flushing;
  }

  #mapFor(kind: StoredKind): Map<string, StoredObject<never>> | undefined {
    switch (kind) {
      case 'MachineConfig': return this.configs as Map<string, StoredObject<never>>;
      case 'MachineConfigPool': return this.pools as Map<string, StoredObject<never>>;
      case 'RenderedConfig': return this.rendered as Map<string, StoredObject<never>>;
      case 'Node': return this.nodes as unknown as Map<string, StoredObject<never>>;
      default: return undefined;
    }
  }
}

export function toStoredNode(node: NodeEntry): StoredNode {
  const { connected: _connected, resourceVersion: _rv, ...stored } = node;
  return stored;
}
