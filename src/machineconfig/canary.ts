// Canaries: the first nodes of a pool, in the rollout order, take a new config before the rest,
// and the rest wait until every canary is updated and Done and has stayed so for the soak.
// Pure, so the rollout, the pool status and the dry-run preview ask the same question the same way.

import { isUpdated } from './node-availability.ts';
import { durationMs } from './duration.ts';
import { rolloutOrder } from './rollout-order.ts';
import type { MachineConfigPool, NodeRecord } from './types.ts';

const PERCENT = /^(\d+)%$/;

/** How many of `machineCount` nodes are canaries: a count as given, a percentage rounded up. */
export function canaryCount(pool: MachineConfigPool, machineCount: number): number {
  const canary = pool.spec.rollout?.canary;
  if (canary === undefined) return 0;
  const n = typeof canary === 'number' ? canary : Math.ceil((Number(PERCENT.exec(canary)?.[1] ?? 0) * machineCount) / 100);
  return Math.min(n, machineCount);
}

/** The pool's canaries: its first nodes in the rollout order (zone, then oldest). */
export function canaryNames(pool: MachineConfigPool, nodes: readonly NodeRecord[]): Set<string> {
  const count = canaryCount(pool, nodes.length);
  if (count === 0) return new Set();
  return new Set([...nodes].sort(rolloutOrder).slice(0, count).map((n) => n.name));
}

/** Whether `node` goes in the canary batch of its pool (the preview shows it). */
export function isCanary(pool: MachineConfigPool, node: string, nodes: readonly NodeRecord[]): boolean {
  return canaryNames(pool, nodes).has(node);
}

/** When the pool's canaries all reached a target, kept by the leader so a failover keeps the soak. */
export interface CanarySoak {
  target: string;
  /** When every canary was first seen updated and Done on `target`. */
  since: number;
}

export interface CanaryGate {
  canaries: Set<string>;
  /** True when the nodes that are not canaries may take the target. */
  open: boolean;
  /** Why they wait, when they do (the pool's Updating condition says it). */
  waitingFor?: string;
  /** When the soak ends, while it runs: the rollout asks to run again then. */
  soakEndsAt?: number;
  /** The soak record to keep: set when the canaries are all updated, cleared when one is not. */
  soak: CanarySoak | undefined;
}

/**
 * Whether the rest of the pool may go. Every canary must be updated and Done on `target`, then
 * stay so for the soak; a canary that stops being so (drift, a failure) restarts the soak.
 */
export function canaryGate(pool: MachineConfigPool, target: string, nodes: readonly NodeRecord[], soak: CanarySoak | undefined, now: number): CanaryGate {
  const canaries = canaryNames(pool, nodes);
  if (canaries.size === 0) return { canaries, open: true, soak: undefined };
  const behind = nodes.filter((n) => canaries.has(n.name) && !isUpdated(n, target));
  if (behind.length > 0) {
    return { canaries, open: false, soak: undefined, waitingFor: `waiting for the canar${behind.length === 1 ? 'y' : 'ies'} ${behind.map((n) => n.name).join(', ')} to be updated` };
  }
  const kept = soak?.target === target ? soak : { target, since: now };
  const ends = kept.since + (durationMs(pool.spec.rollout?.soak ?? '0s') ?? 0);
  if (now < ends) {
    return {
      canaries, open: false, soak: kept, soakEndsAt: ends,
      waitingFor: `the canar${canaries.size === 1 ? 'y' : 'ies'} ${[...canaries].join(', ')} ${canaries.size === 1 ? 'is' : 'are'} soaking until ${new Date(ends).toISOString()} (soak ${pool.spec.rollout!.soak})`,
    };
  }
  return { canaries, open: true, soak: kept };
}
