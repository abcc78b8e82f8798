// What a keyed controller is, and the workers that run one: controller-runtime's Reconciler and
// controller loop, in the small. A controller reconciles one key (a pool name, a node name) at a
// time, taken from its own rate-limited queue; `concurrency` workers take keys at once, and the
// queue guarantees no two of them ever hold the same key. A slow key (a drain held by a
// PodDisruptionBudget) holds one worker, never the controller, and never another controller.
//
// Leadership: the run takes an AbortSignal. When it aborts (this replica stopped leading, or the
// server is stopping) workers take no new keys, and the reconciles in flight see the same signal,
// which they pass to every await on the store and on Kubernetes, so nothing a deposed leader
// started goes on to write.
//
// ControllerManager (controller-manager.ts) gives each controller its lane: a queue, a run, and
// the cache changes mapped to its keys.

import { performance } from 'node:perf_hooks';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { ConflictError } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { CacheChange } from '../cache/cluster-cache.ts';
import { MAX_REQUEUE_MS, type ReconcileResult } from './controller.ts';
import type { RateLimitingQueue, WorkQueue } from './workqueue.ts';

export interface KeyedController<K = string, C = CacheChange> {
  readonly name: string;
  /** Runs only while this replica leads (render, membership, rollout, drain, pool status). */
  readonly leaderOnly: boolean;
  /** Workers taking keys at once; the same key is never reconciled twice at once whatever this is. */
  readonly concurrency: number;
  /**
   * The event handler: the keys a cache change makes worth reconciling. On a resync (the cache
   * relisted, or this replica just became leader) it returns every key it knows of.
   */
  keysFor(change: C): Iterable<K>;
  /**
   * Brings `key` to its desired state. Throwing retries the key with per-key exponential
   * backoff; returning `requeueAfterMs` runs it again then (time-driven work: windows, soaks).
   * `signal` aborts when the run stops: pass it to every store and Kubernetes call.
   */
  reconcile(key: K, signal: AbortSignal): Promise<ReconcileResult | void>;
  /**
   * For controllers fed by something besides the store (a Kubernetes watch): the manager hands
   * over a function that queues every key of this controller.
   */
  bindWake?(wake: () => void): void;
  /**
   * The reconcile's cost grows with the fleet (a pass over every node of a pool): while the lane
   * is busy, its keys gather for twice as long as its last reconcile took (at least the usual
   * 20 ms, at most a second), so it takes at most about a third of the event loop in a burst.
   */
  readonly pacedByCost?: boolean;
  /**
   * The shortest time between two handings of this lane's keys to its workers while changes
   * stream in (controller-runtime's per-item rate limit, in the small). Without it a quiet lane
   * takes every change at once, and the status writer's batches of ~60 reports, each a commit a
   * few milliseconds after the last pass ended, each woke a pass over every node of the pool: 5,000
   * reports made ~80 passes. With it the first change after a quiet spell still goes at once; the
   * rest gather until the interval since that one has passed, and go as one pass.
   */
  readonly minIntervalMs?: number;
}

/** How soon a reconcile that met a newer write tries again. */
export const CONFLICT_RETRY_MS = 10;

export interface RunControllerOptions {
  log: Logger;
  /** Told how long each reconcile took (wall clock), for the manager's pacing. */
  onReconciled?: (ms: number) => void;
}

/** Queues the keys `change` maps to; an event handler that throws is logged, never rethrown into the cache. */
export function enqueueChange<K, C>(
  controller: KeyedController<K, C>,
  queue: Pick<WorkQueue<K>, 'add'>,
  change: C,
  log: Logger,
): void {
  try {
    for (const key of controller.keysFor(change)) queue.add(key);
  } catch (err) {
    log.error({ err, controller: controller.name }, 'mapping a change to keys failed');
  }
}

/**
 * Runs `controller.concurrency` workers on `queue` until `signal` aborts (or the queue shuts
 * down); resolves once every reconcile in flight has returned. The queue outlives the run: keys
 * still queued, and the keys of reconciles cut short by the abort, wait there for the next run.
 */
export async function runController<K, C>(
  controller: KeyedController<K, C>,
  queue: RateLimitingQueue<K>,
  signal: AbortSignal,
  options: RunControllerOptions,
): Promise<void> {
  const { concurrency } = controller;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new RangeError(`controller ${controller.name}: concurrency must be a whole number of at least 1, not ${concurrency}`);
  }
  const log = options.log.child({ controller: controller.name });
  const worker = async (): Promise<void> => {
    for (;;) {
      const key = await queue.get(signal);
      if (key === undefined) return;
      if (signal.aborted) {
        // Handed a key in the same tick the run stopped: leave it queued for the next run.
        queue.add(key);
        queue.done(key);
        return;
      }
      const started = performance.now();
      try {
        await processOne(controller, queue, key, signal, log);
      } finally {
        options.onReconciled?.(performance.now() - started);
        queue.done(key);
      }
      // A turn of the event loop between keys: reconciles chained on settled promises run as
      // one long microtask run otherwise, and status reads and agent streams wait it out.
      await yieldToEventLoop();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

async function processOne<K, C>(
  controller: KeyedController<K, C>,
  queue: RateLimitingQueue<K>,
  key: K,
  signal: AbortSignal,
  log: Logger,
): Promise<void> {
  let result: ReconcileResult | void;
  try {
    result = await controller.reconcile(key, signal);
  } catch (err) {
    if (signal.aborted) {
      // Cut short by the abort: the failure is the abort's, not the key's, so no backoff; left
      // dirty, done() queues it again for the next run.
      queue.add(key);
      log.debug({ err, key }, 'reconcile stopped: the run was cancelled');
      return;
    }
    if (err instanceof ConflictError) {
      // Another lane wrote the same record first (render, rollout and pool status all write a
      // pool's PoolStatus): not a failure to back off from. A short wait lets the cache catch up
      // with the newer write before the next try reads it.
      log.debug({ key, conflict: err.message }, 'reconcile met a newer write; retrying');
      queue.addAfter(key, CONFLICT_RETRY_MS);
      return;
    }
    log.error({ err, key, retries: queue.numRequeues(key) }, 'reconcile failed; retrying with backoff');
    queue.addRateLimited(key);
    return;
  }
  queue.forget(key);
  if (signal.aborted) {
    // It returned, but the run stopped meanwhile: it may not have finished its work.
    queue.add(key);
    return;
  }
  if (result?.requeueAfterMs !== undefined) queue.addAfter(key, Math.min(result.requeueAfterMs, MAX_REQUEUE_MS));
}
