// Computes every pool's counts and conditions from the stored nodes and writes them when they
// change, so every replica serves the same status and a failover keeps the transition times.

import { DEFAULT_DRAIN_STALLED_AFTER_MS, formatWaitChangesIn, windowState } from '../../machineconfig/index.ts';
import type { CacheChange, ClusterCache } from '../cache/cluster-cache.ts';
import { poolStatusFor } from '../cache/pool-status-now.ts';
import { PoolKeys } from './pool-keys.ts';
import type { KeyedController } from './reconciler.ts';
import type { Clock } from '../replica/clock.ts';
import { MAX_REQUEUE_MS, type ReconcileResult } from './controller.ts';
import type { LeaderWriter } from '../replica/leader-writer.ts';
import type { WriteOp } from '../store/store.ts';

export class PoolStatusController implements KeyedController<string> {
  readonly name = 'pool-status';
  readonly leaderOnly = true;
  readonly concurrency = 2;
  /** computePoolStatus looks at every node of the pool. */
  readonly pacedByCost = true;
  /** Counts a status read shows may lag a burst of reports by this much, not by a pass per batch. */
  readonly minIntervalMs = 100;
  readonly #poolKeys: PoolKeys;

  private readonly cache: ClusterCache;
  private readonly writer: LeaderWriter;
  private readonly clock: Clock;
  constructor(cache: ClusterCache, writer: LeaderWriter, clock: Clock) {
    this.cache = cache;
    this.writer = writer;
    this.clock = clock;
    this.#poolKeys = new PoolKeys(cache, ['KubernetesSource']);
  }

  keysFor(change: CacheChange): Iterable<string> {
    return this.#poolKeys.of(change);
  }

  async reconcile(name: string, signal: AbortSignal): Promise<ReconcileResult> {
    const ops: WriteOp[] = [];
    const now = this.clock.now();
    let refreshIn: number | undefined;
    const pool = this.cache.pools.get(name);
    const record = this.cache.poolStatuses.get(name);
    // The render controller creates the record.
    if (pool && record) {
      const status = poolStatusFor(this.cache, name, record.value, now);
      // A pool with windows says when the next opens (and how long until then): run again when
      // that text would change or a window opens or closes.
      const windows = pool.value.spec.maintenanceWindows;
      if (windows?.length) {
        const state = windowState(windows, now);
        const edge = state.open ? state.closesAt! : state.nextStart;
        if (edge !== undefined) refreshIn = Math.min(refreshIn ?? Infinity, formatWaitChangesIn(edge - now), edge - now);
      }
      if (JSON.stringify(status) !== JSON.stringify(record.value.status)) {
        ops.push({ type: 'put', kind: 'PoolStatus', name, value: { ...record.value, status }, expectedVersion: record.resourceVersion, createdAt: record.createdAt });
      }
    }
    await this.writer.commitEach(ops, signal);
    // A drain becomes stalled with time alone, and a window's text changes with it: come back
    // when the next does. setTimeout fires at once beyond 2^31 ms, and a monthly window is
    // further away than that.
    const stallIn = nextStallIn(this.cache, now, name);
    if (refreshIn !== undefined) refreshIn = Math.min(Math.max(1000, refreshIn), MAX_REQUEUE_MS);
    const next = Math.min(stallIn ?? Infinity, refreshIn ?? Infinity);
    return next === Infinity ? {} : { requeueAfterMs: next };
  }
}

/** Milliseconds until the next running drain passes its pool's stall time, if any will. */
function nextStallIn(cache: ClusterCache, now: number, poolName: string): number | undefined {
  let next: number | undefined;
  for (const [name, drain] of cache.drains) {
    if (drain.value.phase !== 'Draining') continue;
    const pool = cache.nodes.get(name)?.pool ?? '';
    if (pool !== poolName) continue;
    const after = (cache.pools.get(pool)?.value.spec.drain?.stalledAfterSeconds ?? DEFAULT_DRAIN_STALLED_AFTER_MS / 1000) * 1000;
    const due = drain.value.startedAt + after - now;
    if (due > 0 && (next === undefined || due < next)) next = due;
  }
  return next;
}
