// The pools a cache change concerns, for controllers keyed by pool (rollout, pool status): the
// pools that changed themselves, the pools of the nodes that changed, now and before (a node that
// moves changes both pools' counts), and the pool of each changed rendered config.

import { NODE_KINDS, type CacheChange, type ClusterCache } from '../cache/cluster-cache.ts';
import type { StoredKind } from '../store/store.ts';

const POOL_KINDS: readonly StoredKind[] = ['MachineConfigPool', 'PoolStatus', 'PoolResume'];

export class PoolKeys {
  /**
   * The pool each node was last seen in, so a node that leaves a pool (moved, deleted) still
   * concerns it. Rebuilt from the cache on every resync: changes seen while this replica did not
   * lead never reached it, and every term starts with a resync.
   */
  #lastPool = new Map<string, string>();

  private readonly cache: ClusterCache;
  /** Kinds whose change concerns every pool (the cluster's disruption policy, say). */
  private readonly everyPoolOn: readonly StoredKind[];
  constructor(
    cache: ClusterCache,
    everyPoolOn: readonly StoredKind[] = [],
  ) {
    this.cache = cache;
    this.everyPoolOn = everyPoolOn;
    this.#remember();
  }

  *of(change: CacheChange): Iterable<string> {
    if (change.resync) this.#remember();
    if (change.resync || this.everyPoolOn.some((k) => change.changed.has(k))) {
      yield* this.cache.pools.keys();
      return;
    }
    const pools = new Set<string>();
    for (const kind of POOL_KINDS) for (const name of change.changed.get(kind) ?? []) pools.add(name);
    for (const name of change.changed.get('RenderedConfig') ?? []) {
      const pool = this.cache.rendered.get(name)?.value.pool;
      if (pool) pools.add(pool);
    }
    // An `mcctl apply --try` names its pool: the assignments of the config it tries follow it.
    for (const name of change.changed.get('ConfigTry') ?? []) {
      const pool = this.cache.configTries.get(name)?.value.pool;
      if (pool) pools.add(pool);
    }
    for (const kind of NODE_KINDS) {
      for (const node of change.changed.get(kind) ?? []) {
        const now = this.cache.nodes.get(node)?.pool || this.cache.assignments.get(node)?.value.pool;
        const before = this.#lastPool.get(node);
        if (now) pools.add(now);
        if (before && before !== now) pools.add(before);
        if (now) this.#lastPool.set(node, now);
        else this.#lastPool.delete(node);
      }
    }
    yield* pools;
  }

  #remember(): void {
    this.#lastPool.clear();
    for (const [node, a] of this.cache.assignments) {
      const pool = this.cache.nodes.get(node)?.pool || a.value.pool;
      if (pool) this.#lastPool.set(node, pool);
    }
  }
}
