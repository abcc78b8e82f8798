// Which nodes of a pool receive the pool's target config next (MCO's node controller).

import { ZONE_LABEL } from './constants.ts';
import { resolveMaxUnavailable } from './machine-config-pool.ts';
import { unavailableReason } from './node-availability.ts';
import { canaryGate, type CanaryGate } from './canary.ts';
import { activeHalt, effectiveTarget, type RolloutState } from './rollout-failures.ts';
import type { MachineConfigPool, NodeRecord } from './types.ts';

/**
 * The leader's rollout bookkeeping and the time, for spec.rollout (canaries, soak, the breaker).
 * Shaped as a part of the decision's context (the clock, and what else decisions read).
 */
export interface RolloutSafetyInput {
  now: number;
  rolloutState?: RolloutState;
}

export interface RolloutDecision {
  /** Nodes to hand the target to now, in order. */
  assign: string[];
  maxUnavailable: number;
  unavailable: number;
  /** Nodes still waiting for the target, when the budget or the pause holds them back. */
  waiting: number;
  /** The config assigned: the target, or the config a rollback returns to (spec.rollout). */
  target?: string;
  /** The canary gate, when the pool has canaries and is not halted. */
  canary?: CanaryGate;
}

/**
 * At most maxUnavailable nodes may be unavailable at once; nodes that are updating,
 * disconnected or degraded already use up that budget. Candidates go in MCO's order: by zone
 * label, then oldest registration first.
 *
 * Two additions to MCO: a node that never had a config (a new host) gets the target at once,
 * since it serves nothing yet; and a degraded node that is not on the target gets it without
 * spending budget, since it is unavailable already, so a fix can reach it (MCO leaves it stuck).
 */
export function decideRollout(pool: MachineConfigPool, renderedTarget: string, nodes: readonly NodeRecord[], safety?: RolloutSafetyInput): RolloutDecision {
  // spec.rollout: a halted pool assigns nothing (Pause) or sends its nodes back (Rollback); the
  // rules are in rollout-failures.ts and canary.ts.
  const halt = activeHalt(safety?.rolloutState, renderedTarget);
  const target = effectiveTarget(safety?.rolloutState, renderedTarget);
  const gate = safety?.rolloutState && !halt ? canaryGate(pool, target, nodes, safety.rolloutState.soak, safety.now) : undefined;
  const maxUnavailable = resolveMaxUnavailable(pool.spec.maxUnavailable, nodes.length);
  const unavailable = nodes.filter((n) => unavailableReason(n) !== undefined).length;
  const pending = nodes.filter((n) => n.desiredConfig !== target);
  if (pool.spec.paused || !target || (halt && target === renderedTarget)) return { assign: [], maxUnavailable, unavailable, waiting: pending.length, target };

  const fresh: NodeRecord[] = [];
  const free: NodeRecord[] = [];
  const budgeted: NodeRecord[] = [];
  for (const n of pending) {
    if (!n.connected) continue; // it gets the target when it returns and is a candidate again
    if (!n.status.currentConfig && !n.desiredConfig) fresh.push(n);
    else if (gate && !gate.open && !gate.canaries.has(n.name)) continue; // after the canaries' soak
    else if (unavailableReason(n) !== undefined) free.push(n);
    else budgeted.push(n);
  }
  const capacity = Math.max(0, maxUnavailable - unavailable);
  const chosen = [...fresh, ...free, ...budgeted.sort(rolloutOrder).slice(0, capacity)];
  return { assign: chosen.map((n) => n.name), maxUnavailable, unavailable, waiting: pending.length - chosen.length, target, ...(gate ? { canary: gate } : {}) };
}

export function rolloutOrder(a: NodeRecord, b: NodeRecord): number {
  const za = a.labels[ZONE_LABEL] ?? '';
  const zb = b.labels[ZONE_LABEL] ?? '';
  if (za !== zb) return za < zb ? -1 : 1;
  if (a.registeredAt !== b.registeredAt) return a.registeredAt - b.registeredAt;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}
