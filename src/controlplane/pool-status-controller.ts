// Computes every pool's counts and conditions from the stored nodes and writes them when they
// change, so every replica serves the same status and a failover keeps the transition times.

import { computePoolStatus, decideRollout, formatWaitChangesIn, windowState, type PoolStatus } from '../machineconfig/index.ts';
import { changesPoolsOrNodes, type CacheChange, type ClusterCache } from './cluster-cache.ts';
import type { Clock } from './clock.ts';
import type { Controller, ReconcileResult } from './controller.ts';
import type { LeaderWriter } from './leader-writer.ts';
import { rolloutContext } from './node-update-plan.ts';
import type { WriteOp } from './store/store.ts';
import type { PoolStatusRecord } from './stored-records.ts';

/** Longest wait between runs for time-driven work (windows): a timer cannot wait longer safely. */
export const MAX_REQUEUE_MS = 6 * 3600_000;

export class PoolStatusController implements Controller {
  readonly name = 'pool-status';
  readonly leaderOnly = true;

  constructor(private readonly cache: ClusterCache, private readonly writer: LeaderWriter, private readonly clock: Clock) {}

  interestedIn(change: CacheChange): boolean {
    return changesPoolsOrNodes(change);
  }

  async reconcile(): Promise<ReconcileResult | void> {
    const ops: WriteOp[] = [];
    const now = this.clock.now();
    let refreshIn: number | undefined;
    for (const [name, pool] of this.cache.pools) {
      const record = this.cache.poolStatuses.get(name);
      if (!record) continue; // the render controller creates it
      const status = poolStatusFor(this.cache, name, record.value, now);
      // A pool with windows says when the next opens (and how long until then): run again when
      // that text would change or a window opens or closes.
      const windows = pool.value.spec.maintenanceWindows;
      if (windows?.length) {
        const state = windowState(windows, now);
        const edge = state.open ? state.closesAt! : state.nextStart;
        if (edge !== undefined) refreshIn = Math.min(refreshIn ?? Infinity, formatWaitChangesIn(edge - now), edge - now);
      }
      if (JSON.stringify(status) === JSON.stringify(record.value.status)) continue;
      ops.push({ type: 'put', kind: 'PoolStatus', name, value: { ...record.value, status }, expectedVersion: record.resourceVersion, createdAt: record.createdAt });
    }
    await this.writer.commitEach(ops);
    // setTimeout fires at once beyond 2^31 ms, and a monthly window is further away than that.
    if (refreshIn !== undefined) return { requeueAfterMs: Math.min(Math.max(1000, refreshIn), MAX_REQUEUE_MS) };
  }
}

/** The status a pool record implies now, keeping the transition times of unchanged conditions. */
export function poolStatusFor(cache: ClusterCache, pool: string, record: PoolStatusRecord, now = Date.now()): PoolStatus | undefined {
  const spec = cache.pools.get(pool);
  if (!spec) return undefined;
  return computePoolStatus({
    pool: spec.value,
    target: record.target,
    targetSources: record.targetSources,
    nodes: cache.nodesInPool(pool),
    renderProblems: record.renderProblems,
    previous: record.status?.conditions,
    now,
    // Only windows and group budgets add to the message: skip the decision for other pools (a
    // status pass runs on every report, and pools can have thousands of nodes).
    rollout: record.target && (spec.value.spec.maintenanceWindows?.length || spec.value.spec.disruptionBudget)
      ? decideRollout(spec.value, record.target, cache.nodesInPool(pool), rolloutContext(cache, now, record.target))
      : undefined,
  });
}

