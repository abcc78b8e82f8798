// Computes every pool's counts and conditions from the stored nodes and writes them when they
// change, so every replica serves the same status and a failover keeps the transition times.

import { activeHalt, canaryGate, computePoolStatus, decideRollout, DEFAULT_DRAIN_STALLED_AFTER_MS, effectiveTarget, formatWaitChangesIn, matchesSelector, windowState, type DrainInProgress, type MachineConfigPool, type PoolStatus, type Problem } from '../../machineconfig/index.ts';
import type { CacheChange, ClusterCache } from '../cache/cluster-cache.ts';
import { PoolKeys } from './pool-keys.ts';
import type { KeyedController } from './reconciler.ts';
import type { Clock } from '../replica/clock.ts';
import { MAX_REQUEUE_MS, type ReconcileResult } from './controller.ts';
import type { LeaderWriter } from '../replica/leader-writer.ts';
import { rolloutContext } from '../cache/node-update-plan.ts';
import type { WriteOp } from '../store/store.ts';
import type { PoolStatusRecord } from '../store/stored-records.ts';

export class PoolStatusController implements KeyedController<string> {
  readonly name = 'pool-status';
  readonly leaderOnly = true;
  readonly concurrency = 2;
  /** computePoolStatus looks at every node of the pool. */
  readonly pacedByCost = true;
  readonly #poolKeys: PoolKeys;

  constructor(private readonly cache: ClusterCache, private readonly writer: LeaderWriter, private readonly clock: Clock) {
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
