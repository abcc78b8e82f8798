// An estimated time to the end of each pool's rollout, from what recent updates took: every
// replica watches assignments and reports through its cache, notes when a node was given a new
// desired config, and when that node reports Done on it, keeps the duration (assigned -> Done)
// among its pool's recent ones. The estimate is the mean of those times the waves still to go:
// ceil(nodes not yet updated / maxUnavailable), plus the wait for the pool's next maintenance
// window when the pool says it waits for one.
//
// Nodes already mid-update when this replica started are not measured (their start is unknown),
// so right after a start there may be no estimate yet.

import { conditionOf, resolveMaxUnavailable, windowState, type MachineConfigPool, type PoolStatus } from '../../machineconfig/index.ts';
import type { NodeView } from '../cache/cluster-cache.ts';

/** How many recent update durations per pool the mean is taken over. */
export const RECENT_UPDATES = 10;

interface Pending {
  desired: string;
  /** Undefined when the assignment was already under way when first seen: not measured. */
  assignedAt?: number;
}

export class RolloutEta {
  readonly #pending = new Map<string, Pending>();
  readonly #recent = new Map<string, number[]>();

  private readonly now: () => number;
  constructor(now: () => number = Date.now) {
    this.now = now;
  }

  /** A node's view changed (or was first seen: `initial`). */
  observe(node: NodeView | undefined, name: string, initial: boolean): void {
    if (!node) {
      this.#pending.delete(name);
      return;
    }
    const desired = node.desiredConfig;
    const reached = desired !== '' && node.status.currentConfig === desired && node.status.state === 'Done';
    const pending = this.#pending.get(name);
    if (reached) {
      if (pending?.desired === desired && pending.assignedAt !== undefined && node.pool) {
        const list = this.#recent.get(node.pool) ?? [];
        list.push((this.now() - pending.assignedAt) / 1000);
        if (list.length > RECENT_UPDATES) list.shift();
        this.#recent.set(node.pool, list);
      }
      this.#pending.delete(name);
      return;
    }
    if (desired === '') {
      this.#pending.delete(name);
      return;
    }
    if (pending?.desired === desired) return;
    this.#pending.set(name, initial ? { desired } : { desired, assignedAt: this.now() });
  }

  /** Seconds the pool's rollout still needs, or undefined: nothing rolling out, or no estimate yet. */
  etaSeconds(pool: MachineConfigPool, status: PoolStatus | undefined): number | undefined {
    if (!status || !status.configuration || pool.spec.paused) return undefined;
    const remaining = status.machineCount - status.updatedMachineCount;
    if (remaining <= 0) return undefined;
    const recent = this.#recent.get(pool.metadata.name);
    if (!recent?.length) return undefined;
    const mean = recent.reduce((a, b) => a + b, 0) / recent.length;
    const budget = resolveMaxUnavailable(pool.spec.maxUnavailable, status.machineCount);
    const waves = mean * Math.ceil(remaining / Math.max(1, budget));
    // Nothing moves until the window opens (a window too short for every wave is not foreseen).
    const windows = pool.spec.maintenanceWindows;
    if (windows?.length && conditionOf(status, 'Updating')?.reason === 'WaitingForMaintenanceWindow') {
      const next = windowState(windows, this.now()).nextStart;
      if (next !== undefined) return waves + Math.max(0, next - this.now()) / 1000;
    }
    return waves;
  }

  /** The pool's recent update durations in seconds (oldest first). */
  recent(pool: string): readonly number[] {
    return this.#recent.get(pool) ?? [];
  }
}
