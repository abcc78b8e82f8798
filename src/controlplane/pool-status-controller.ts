// Computes every pool's counts and conditions from the stored nodes and writes them when they
// change, so every replica serves the same status and a failover keeps the transition times.

import { activeHalt, canaryGate, computePoolStatus, effectiveTarget, type PoolStatus } from '../machineconfig/index.ts';
import { changesPoolsOrNodes, type CacheChange, type ClusterCache } from './cluster-cache.ts';
import type { Clock } from './clock.ts';
import type { Controller } from './controller.ts';
import type { LeaderWriter } from './leader-writer.ts';
import type { WriteOp } from './store/store.ts';
import type { PoolStatusRecord } from './stored-records.ts';


export class PoolStatusController implements Controller {
  readonly name = 'pool-status';
  readonly leaderOnly = true;

  constructor(private readonly cache: ClusterCache, private readonly writer: LeaderWriter, private readonly clock: Clock) {}

  interestedIn(change: CacheChange): boolean {
    return changesPoolsOrNodes(change);
  }

  async reconcile(): Promise<void> {
    const ops: WriteOp[] = [];
    for (const name of this.cache.pools.keys()) {
      const record = this.cache.poolStatuses.get(name);
      if (!record) continue; // the render controller creates it
      const status = poolStatusFor(this.cache, name, record.value, this.clock.now());
      if (JSON.stringify(status) === JSON.stringify(record.value.status)) continue;
      ops.push({ type: 'put', kind: 'PoolStatus', name, value: { ...record.value, status }, expectedVersion: record.resourceVersion, createdAt: record.createdAt });
    }
    await this.writer.commitEach(ops);
  }
}

/** The status a pool record implies now, keeping the transition times of unchanged conditions. */
export function poolStatusFor(cache: ClusterCache, pool: string, record: PoolStatusRecord, now = Date.now()): PoolStatus | undefined {
  const spec = cache.pools.get(pool);
  if (!spec) return undefined;
  const nodes = cache.nodesInPool(pool);
  // spec.rollout: a pool rolled back reports the config it returned to, and says why.
  const halt = activeHalt(record.rollout, record.target);
  const target = effectiveTarget(record.rollout, record.target);
  const canaryWait = !halt && spec.value.spec.rollout && target ? canaryGate(spec.value, target, nodes, record.rollout?.soak, now).waitingFor : undefined;
  return computePoolStatus({
    pool: spec.value,
    target,
    targetSources: target === record.target ? record.targetSources : cache.rendered.get(target)?.value.sources ?? [],
    nodes,
    renderProblems: record.renderProblems,
    previous: record.status?.conditions,
    now,
    ...(halt ? { halt } : {}),
    ...(canaryWait ? { canaryWait } : {}),
  });
}

