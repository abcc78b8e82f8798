// Hands each pool's target to its nodes within maxUnavailable (decideRollout has the rules) by
// writing the nodes' desired config into the store. It sends nothing: the replica holding each
// node's stream sees the write and sends the assignment. Because the decision rests on stored
// state only, a node assigned a config it has not reached counts against the budget whoever
// assigned it, across a failover too.

import { decideRollout } from '../machineconfig/index.ts';
import type { Logger } from '../runtime/logger.ts';
import { changesPoolsOrNodes, type CacheChange, type ClusterCache } from './cluster-cache.ts';
import type { Clock } from './clock.ts';
import type { Controller } from './controller.ts';
import type { LeaderWriter } from './leader-writer.ts';
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

  async reconcile(): Promise<void> {
    const ops: WriteOp[] = [];
    for (const [name, stored] of this.cache.pools) {
      const target = this.cache.poolTarget(name);
      if (!target) continue;
      const decision = decideRollout(stored.value, target, this.cache.nodesInPool(name));
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
  }
}
