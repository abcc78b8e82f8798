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
import { drainDecision, type DrainAccess } from './drain-gate.ts';
import type { LeaderWriter } from './leader-writer.ts';
import { rolloutContext } from './node-update-plan.ts';
import { MAX_REQUEUE_MS } from './pool-status-controller.ts';
import type { WriteOp } from './store/store.ts';
import type { NodeAssignmentRecord } from './stored-records.ts';


export class RolloutController implements Controller {
  readonly name = 'rollout';
  readonly leaderOnly = true;

  constructor(
    private readonly cache: ClusterCache,
    private readonly writer: LeaderWriter,
    /** For time-driven decisions (windows, soaks); unused by the plain maxUnavailable rule. */
    protected readonly clock: Clock,
    private readonly log: Logger,
    /** Set with Kubernetes access: a config that needs a drain is written held until drained. */
    private readonly drains?: DrainAccess,
  ) {}

  interestedIn(change: CacheChange): boolean {
    return changesPoolsOrNodes(change);
  }

  async reconcile(): Promise<ReconcileResult | void> {
    const ops: WriteOp[] = [];
    // Nodes whose update would need a drain that cannot be decided yet: said once per pass.
    const waiting: string[] = [];
    let waitReason = '';
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
        const drain = drainDecision(this.cache, this.cache.nodes.get(node)!, target, this.drains);
        if ('wait' in drain) {
          waiting.push(node);
          waitReason = drain.wait;
          continue;
        }
        const { holdForDrain: _held, drainNote: _note, ...rest } = assignment.value;
        const value: NodeAssignmentRecord = { ...rest, desiredConfig: target };
        if (drain.hold) value.holdForDrain = true;
        else if (drain.note) value.drainNote = drain.note;
        if (drain.hold) this.log.info({ node, target }, 'config held until the node is drained');
        else if (drain.note) this.log.info({ node, target, reason: drain.note }, 'config assigned without drain');
        ops.push({
          type: 'put', kind: 'NodeAssignment', name: node, value,
          expectedVersion: assignment.resourceVersion, createdAt: assignment.createdAt,
        });
      }
    }
    if (waiting.length) this.log.info({ nodes: waiting.length <= 20 ? waiting : `${waiting.length} nodes`, reason: waitReason }, 'assignments wait: they may need a drain');
    await this.writer.commitEach(ops);
    if (nextWindowStart !== undefined) return { requeueAfterMs: Math.min(Math.max(1000, nextWindowStart - now), MAX_REQUEUE_MS) };
  }
}
