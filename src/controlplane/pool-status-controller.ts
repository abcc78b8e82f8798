// Computes every pool's counts and conditions from the stored nodes and writes them when they
// change, so every replica serves the same status and a failover keeps the transition times.

import { computePoolStatus, matchesSelector, type MachineConfigPool, type PoolStatus, type Problem } from '../machineconfig/index.ts';
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
    return changesPoolsOrNodes(change) || change.changed.has('KubernetesSource');
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
  return computePoolStatus({
    pool: spec.value,
    target: record.target,
    targetSources: record.targetSources,
    nodes: cache.nodesInPool(pool),
    renderProblems: [...record.renderProblems, ...sourceProblemsFor(cache, spec.value)],
    previous: record.status?.conditions,
    now,
  });
}


/**
 * With --kubernetes-source, the problems of the cluster objects this pool would take: its own
 * MachineConfigPool, and each invalid MachineConfig its selector picks by the labels the cluster
 * has on it. The pool keeps rendering from the last good versions; RenderDegraded says why.
 */
function sourceProblemsFor(cache: ClusterCache, pool: MachineConfigPool): Problem[] {
  const invalid = cache.kubernetesSource?.value.invalid ?? [];
  return invalid.flatMap((o) => {
    if (o.kind === 'MachineConfigPool') return o.name === pool.metadata.name ? o.problems : [];
    return matchesSelector(pool.spec.machineConfigSelector, o.labels) ? o.problems : [];
  });
}
