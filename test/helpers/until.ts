// Waiting for in-process state that changes within milliseconds (a controller's reconcile
// counters, a queue's requeues): checked every 5 ms, so a test that counts steps one at a time sees
// each, with a deadline scaled by time-scale.ts for a busy machine. Shared by the controller tests,
// which each carried the same loop (bounded by an iteration count, which a loaded machine's slower
// timers stretched but nothing scaled).

import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { scaled } from './time-scale.ts';

/** Waits until `cond` holds; fails naming `what` after `quietMs` (on a quiet machine). */
export async function until(cond: () => boolean, what: string, quietMs = 10_000): Promise<void> {
  const budget = scaled(quietMs);
  const deadline = Date.now() + budget;
  while (!cond()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what} (${budget} ms)`);
    await sleep(5);
  }
}
