// What a whole-pass controller is: it decides and writes to the store; it never sends to agents.
// It looks at everything in one pass; controllers/whole-pass.ts runs it as the single key of its
// own lane, when a change it cares about reaches the cache, and again after `requeueAfterMs` when
// it asks (time-driven work: windows, retries, heartbeats). Keyed controllers are
// controllers/reconciler.ts's KeyedController.

import type { CacheChange } from '../cache/cluster-cache.ts';

export interface ReconcileResult {
  requeueAfterMs?: number;
}

export interface Controller {
  readonly name: string;
  /** Runs only on the elected leader (render, membership, rollout, GC, pool status). */
  readonly leaderOnly: boolean;
  interestedIn(change: CacheChange): boolean;
  /** `signal` aborts when this replica stops leading: pass it to the store writes. */
  reconcile(signal?: AbortSignal): Promise<ReconcileResult | void>;
  /**
   * For controllers fed by something besides the store (a Kubernetes watch): the manager hands
   * over a function that marks the controller dirty and schedules a pass.
   */
  bindWake?(wake: () => void): void;
  /** A pass costs in proportion to the fleet: see KeyedController.pacedByCost. */
  readonly pacedByCost?: boolean;
  /** The shortest time between two passes while changes stream in: see KeyedController.minIntervalMs. */
  readonly minIntervalMs?: number;
}

/** Longest wait between runs for time-driven work (windows): a timer cannot wait longer safely. */
export const MAX_REQUEUE_MS = 6 * 3600_000;
