// A controller that is not keyed yet: its one pass over everything becomes the one key of a lane
// of its own, so it still never runs twice at once, and never waits for another controller.
// Controllers whose work splits by pool or by node are keyed themselves (drain, render, rollout).

import type { CacheChange } from '../cache/cluster-cache.ts';
import type { Controller } from './controller.ts';
import type { KeyedController } from './reconciler.ts';

/** The only key of a whole-pass controller. */
export const WHOLE_PASS = '*';

export function wholePass(controller: Controller): KeyedController<string> {
  return {
    name: controller.name,
    leaderOnly: controller.leaderOnly,
    concurrency: 1,
    // interestedIn is asked even on a resync: some controllers forget what they sent there.
    keysFor: (change: CacheChange) => (controller.interestedIn(change) || change.resync ? [WHOLE_PASS] : []),
    reconcile: (_key, signal) => controller.reconcile(signal),
    ...(controller.bindWake ? { bindWake: (wake: () => void) => controller.bindWake!(wake) } : {}),
    ...(controller.pacedByCost ? { pacedByCost: true } : {}),
    ...(controller.minIntervalMs ? { minIntervalMs: controller.minIntervalMs } : {}),
  };
}
