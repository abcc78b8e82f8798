// The circuit breaker: a pool with spec.rollout stops once more than maxFailures of its nodes
// failed on its target. It then either pauses (assigns nothing more) or rolls back (the pool's
// nodes return to the last config they all reached). The halt is the leader's record, not the
// user's spec.paused: it ends when the rendered target changes or an operator resumes the pool.

import type { CanarySoak } from './canary.ts';
import { isUpdated } from './node-availability.ts';
import { FAILED_NODE_STATES } from './node-availability.ts';
import type { MachineConfigPool, NodeRecord, NodeState, RolloutFailureAction } from './types.ts';

const LIST_LIMIT = 10;

export interface FailedNode {
  node: string;
  state: NodeState;
  reason: string;
}

export interface RolloutHalt {
  /** The rendered config that failed; the halt holds only while the pool still targets it. */
  target: string;
  action: RolloutFailureAction;
  /** Rollback: the config the pool returns to ("" when it had none: it pauses instead). */
  rollbackTo: string;
  failed: FailedNode[];
  at: number;
}

/** The leader's rollout bookkeeping for one pool (kept in its PoolStatus record). */
export interface RolloutState {
  /** The last config every node of the pool reached: what a Rollback returns to. */
  stableConfig?: string;
  soak?: CanarySoak;
  halt?: RolloutHalt;
  /** Failures an operator resumed past (`mcctl resume pool`): not counted again on this target. */
  forgiven?: { target: string; nodes: string[] };
}

/** Nodes that took `target` and failed on it: the agent reports the target and a failed state. */
export function failedNodes(target: string, nodes: readonly NodeRecord[], forgiven?: RolloutState['forgiven']): FailedNode[] {
  const skip = new Set(forgiven?.target === target ? forgiven.nodes : []);
  return nodes
    .filter((n) => n.desiredConfig === target && n.status.desiredConfig === target && FAILED_NODE_STATES.has(n.status.state) && !skip.has(n.name))
    .map((n) => ({ node: n.name, state: n.status.state, reason: n.status.reason }));
}

/** The halt in force for the pool's current target, or undefined (a new target ends a halt). */
export function activeHalt(state: RolloutState | undefined, target: string): RolloutHalt | undefined {
  return state?.halt && state.halt.target === target ? state.halt : undefined;
}

/** The config the pool's nodes are sent: the rendered target, or the one a rollback returns to. */
export function effectiveTarget(state: RolloutState | undefined, target: string): string {
  const halt = activeHalt(state, target);
  return halt?.action === 'Rollback' && halt.rollbackTo ? halt.rollbackTo : target;
}

/**
 * The pool's next bookkeeping: the stable config advances when every node reached the target,
 * and the breaker trips once more than maxFailures nodes failed on it.
 */
export function nextRolloutState(pool: MachineConfigPool, target: string, nodes: readonly NodeRecord[], state: RolloutState | undefined, now: number): RolloutState {
  const next: RolloutState = { ...state };
  if (next.halt && next.halt.target !== target) delete next.halt;
  if (next.forgiven && next.forgiven.target !== target) delete next.forgiven;
  if (nodes.length > 0 && nodes.every((n) => isUpdated(n, target))) next.stableConfig = target;
  const policy = pool.spec.rollout;
  if (!policy || next.halt || !target) return next;
  const failed = failedNodes(target, nodes, next.forgiven);
  if (failed.length > policy.maxFailures) {
    const rollbackTo = policy.onFailure === 'Rollback' && next.stableConfig && next.stableConfig !== target ? next.stableConfig : '';
    next.halt = { target, action: policy.onFailure, rollbackTo, failed, at: now };
  }
  return next;
}

/** What the pool's Updating condition says about a halt: the config, the failed nodes and the way out. */
export function describeHalt(pool: string, halt: RolloutHalt, maxFailures: number): { reason: string; message: string } {
  const shown = halt.failed.slice(0, LIST_LIMIT).map((f) => `${f.node} (${f.state}: ${f.reason || 'no reason reported'})`).join(', ');
  const more = halt.failed.length > LIST_LIMIT ? ` and ${halt.failed.length - LIST_LIMIT} more` : '';
  const why = `${halt.failed.length} node${halt.failed.length === 1 ? '' : 's'} failed on ${halt.target} (maxFailures ${maxFailures}): ${shown}${more}`;
  const resume = `\`mcctl resume pool ${pool}\` retries ${halt.target}; a new config ends the halt too`;
  if (halt.action === 'Rollback' && halt.rollbackTo) {
    return { reason: 'RolledBack', message: `rolled back to ${halt.rollbackTo}: ${why}; ${resume}` };
  }
  const noPrevious = halt.action === 'Rollback' ? ' (no earlier config every node reached, so nothing to roll back to)' : '';
  return { reason: 'RolloutPaused', message: `the rollout stopped${noPrevious}: ${why}; ${resume}` };
}
