// Which nodes of a pool receive the pool's target config next (MCO's node controller).

import { ZONE_LABEL } from './constants.ts';
import { resolveMaxUnavailable } from './machine-config-pool.ts';
import { unavailableReason } from './node-availability.ts';
import type { MachineConfigPool, NodeRecord } from './types.ts';

export interface RolloutDecision {
  /** Nodes to hand the target to now, in order. */
  assign: string[];
  maxUnavailable: number;
  unavailable: number;
  /** Nodes still waiting for the target, when the budget or the pause holds them back. */
  waiting: number;
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
export function decideRollout(pool: MachineConfigPool, target: string, nodes: readonly NodeRecord[]): RolloutDecision {
  const maxUnavailable = resolveMaxUnavailable(pool.spec.maxUnavailable, nodes.length);
  const unavailable = nodes.filter((n) => unavailableReason(n) !== undefined).length;
  const pending = nodes.filter((n) => n.desiredConfig !== target);
  if (pool.spec.paused || !target) return { assign: [], maxUnavailable, unavailable, waiting: pending.length };

  const fresh: NodeRecord[] = [];
  const free: NodeRecord[] = [];
  const budgeted: NodeRecord[] = [];
  for (const n of pending) {
    if (!n.connected) continue; // it gets the target when it returns and is a candidate again
    if (!n.status.currentConfig && !n.desiredConfig) fresh.push(n);
    else if (unavailableReason(n) !== undefined) free.push(n);
    else budgeted.push(n);
  }
  const capacity = Math.max(0, maxUnavailable - unavailable);
  const chosen = [...fresh, ...free, ...budgeted.sort(rolloutOrder).slice(0, capacity)];
  return { assign: chosen.map((n) => n.name), maxUnavailable, unavailable, waiting: pending.length - chosen.length };
}

export function rolloutOrder(a: NodeRecord, b: NodeRecord): number {
  const za = a.labels[ZONE_LABEL] ?? '';
  const zb = b.labels[ZONE_LABEL] ?? '';
  if (za !== zb) return za < zb ? -1 : 1;
  if (a.registeredAt !== b.registeredAt) return a.registeredAt - b.registeredAt;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}
