// A pool's counts and conditions as its record and the cache imply them now: what the
// pool-status controller stores when it changes, and what the render controller stores with a new
// target, so a reader never sees a target without its counts.

import { activeHalt, canaryGate, computePoolStatus, decideRollout, effectiveTarget, matchesSelector, type DrainInProgress, type MachineConfigPool, type PoolStatus, type Problem } from '../../machineconfig/index.ts';
import type { PoolStatusRecord } from '../store/stored-records.ts';
import type { ClusterCache } from './cluster-cache.ts';
import { rolloutContext } from './node-update-plan.ts';

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
    renderProblems: [...record.renderProblems, ...sourceProblemsFor(cache, spec.value)],
    previous: record.status?.conditions,
    now,
    ...drainsOf(cache, pool),
    // Only windows and group budgets add to the message: skip the decision for other pools (a
    // status pass runs on every report, and pools can have thousands of nodes).
    rollout: target && (spec.value.spec.maintenanceWindows?.length || spec.value.spec.disruptionBudget)
      ? decideRollout(spec.value, record.target, nodes, { ...rolloutContext(cache, now, record.target), ...(record.rollout ? { rolloutState: record.rollout } : {}) })
      : undefined,
    ...(halt ? { halt } : {}),
    ...(canaryWait ? { canaryWait } : {}),
  });
}

/** The pool's running drains, once the cluster's Nodes are known (see PoolStatusInput.drains). */
function drainsOf(cache: ClusterCache, pool: string): { drains?: DrainInProgress[]; drainStalledAfterMs?: number } {
  if (cache.kubernetesNodes.size === 0) return {};
  const drains: DrainInProgress[] = [];
  for (const node of cache.nodesInPool(pool)) {
    if (node.drain?.phase === 'Draining') drains.push({ node: node.name, startedAt: node.drain.startedAt, reason: node.drain.reason });
  }
  const seconds = cache.pools.get(pool)?.value.spec.drain?.stalledAfterSeconds;
  return { drains, ...(seconds ? { drainStalledAfterMs: seconds * 1000 } : {}) };
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
    // A refused KubeletConfig or mirror set says so in its own Warning Event: its generated
    // configs keep their last good version.
    if (o.kind !== 'MachineConfig') return [];
    return matchesSelector(pool.spec.machineConfigSelector, o.labels) ? o.problems : [];
  });
}
