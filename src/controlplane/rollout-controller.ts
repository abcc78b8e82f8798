// Hands each pool's target to its nodes within maxUnavailable (decideRollout has the rules) by
// writing the nodes' desired config into the store. It sends nothing: the replica holding each
// node's stream sees the write and sends the assignment. Because the decision rests on stored
// state only, a node assigned a config it has not reached counts against the budget whoever
// assigned it, across a failover too.

import { decideRollout } from '../machineconfig/index.ts';
import type { Logger } from '../runtime/logger.ts';
import { changesPoolsOrNodes, type CacheChange, type ClusterCache } from './cluster-cache.ts';
import type { Clock } from './clock.ts';
import type { Controller, ReconcileResult } from './controller.ts';
import type { LeaderWriter } from './leader-writer.ts';
import { rolloutContext } from './node-update-plan.ts';
import { MAX_REQUEUE_MS } from './pool-status-controller.ts';
import type { WriteOp } from './store/store.ts';


export class RolloutController implements Controller {
  readonly name = 'rollout';
  readonly leaderOnly = true;

  constructor(
    private readonly cache: ClusterCache,
    private readonly writer: LeaderWriter,
    /** For time-driven decisions (windows, soaks); unused by the plain maxUnavailable rule. */
    protected readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  interestedIn(change: CacheChange): boolean {
    return changesPoolsOrNodes(change);
  }

  async reconcile(): Promise<ReconcileResult | void> {
    const ops: WriteOp[] = [];
    const now = this.clock.now();
    let nextWindowStart: number | undefined;
    for (const [name, stored] of this.cache.pools) {
      const target = this.cache.poolTarget(name);
      if (!target) continue;
      const decision = decideRollout(stored.value, target, this.cache.nodesInPool(name), rolloutContext(this.cache, now, target));
      // Nodes held for a window go when it opens: run again then, not at the next change.
      if (decision.nextWindowStart !== undefined) nextWindowStart = Math.min(nextWindowStart ?? Infinity, decision.nextWindowStart);
      if (decision.heldForWindow.length && decision.assign.length === 0) {
        this.log.debug({ pool: name, waiting: decision.heldForWindow.length, nextWindowStart: nextWindowStart && new Date(nextWindowStart).toISOString() }, 'waiting for maintenance window');
      }
      if (decision.assign.length === 0) continue;
      this.log.info({ pool: name, target, nodes: decision.assign.length <= 20 ? decision.assign : `${decision.assign.length} nodes`, maxUnavailable: decision.maxUnavailable, waiting: decision.waiting }, 'assigning config');
      for (const node of decision.assign) {
        const assignment = this.cache.assignments.get(node)!;
        ops.push({
          type: 'put', kind: 'NodeAssignment', name: node, value: { ...assignment.value, desiredConfig: target },
          expectedVersion: assignment.resourceVersion, createdAt: assignment.createdAt,
        });
      }
    }
    await this.writer.commitEach(ops);
    if (nextWindowStart !== undefined) return { requeueAfterMs: Math.min(Math.max(1000, nextWindowStart - now), MAX_REQUEUE_MS) };
  }
}
