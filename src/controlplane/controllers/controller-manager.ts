// Runs every controller in a lane of its own: its own rate-limited queue of keys and its own
// workers (controller-runtime's manager, in the small). A reconcile that waits (a drain held by a
// PodDisruptionBudget, a slow API server) holds one worker of one controller: render, membership
// and rollout go on beside it.
//
// Leader-only controllers run while this replica leads. Leadership starts them with a fresh
// AbortSignal and queues every key they know of (anything may have changed under another
// leader); losing it aborts that signal, so workers take no new keys and the reconciles in flight
// stop at their next store or Kubernetes call (LeaderWriter and NodeOperations check the signal).
//
// Bursts of changes (5,000 agents reporting Done within a second) are coalesced per controller:
// a quiet lane queues the first change's keys at once, and later ones gather for a few
// milliseconds while it works; the queue folds a key added twice into one reconcile, so one
// reconcile sees the whole burst. A controller whose pass grows with the fleet (pool status,
// events: every node of a pool) gathers for twice as long as its last pass took, so in a burst
// of 5,000 reports it does not take the loop from the agents and the reads. A controller with a
// minimum interval (KeyedController.minIntervalMs) also gathers the changes that find its lane
// quiet, when its keys were last handed out less than that interval ago: a quiet lane is not an
// idle one while the status writer commits a batch every few milliseconds.

import { performance } from 'node:perf_hooks';
import type { Logger } from '../../runtime/logger.ts';
import type { CacheChange, ClusterCache } from '../cache/cluster-cache.ts';
import { RateLimitedQueue } from './rate-limited-queue.ts';
import { CONFLICT_RETRY_MS, enqueueChange, runController, type KeyedController } from './reconciler.ts';

/** How long a controller's keys gather before they are queued. */
const COALESCE_MS = 20;
/** The longest a paced controller's keys gather (KeyedController.pacedByCost). */
const MAX_PACED_COALESCE_MS = 1000;
/** settle() gives up after this long: a controller that never goes idle is a bug, not a hang. */
const SETTLE_LIMIT_MS = 30_000;

/** A cache change that stands for "anything may have changed": every key of every controller. */
export function resyncChange(revision: number): CacheChange {
  return { revision, changed: new Map(), nodes: new Set(), resync: true };
}

interface Lane {
  controller: KeyedController<string>;
  queue: RateLimitedQueue<string>;
  /** Keys gathered during the coalescing wait. */
  pending: Set<string>;
  timer: NodeJS.Timeout | undefined;
  /** The run under way, until its signal aborts and its workers return. */
  run: Promise<void> | undefined;
  /** How long the lane's last reconcile took, for pacedByCost. */
  lastReconcileMs: number;
  /** When (performance.now()) the lane's keys were last handed to its queue, for minIntervalMs. */
  lastFlushAt: number;
}

export class ControllerManager {
  readonly #lanes: Lane[];
  #leadership: AbortController | undefined;
  /** Aborted by stop(): the runs of the lanes that are not leader-only. */
  readonly #lifetime = new AbortController();
  #stopped = false;
  readonly #onChange = (change: CacheChange): void => {
    for (const lane of this.#lanes) if (this.#runnable(lane)) this.#enqueue(lane, change);
  };

  private readonly cache: ClusterCache;
  private readonly log: Logger;
  constructor(
    controllers: readonly KeyedController<string>[],
    cache: ClusterCache,
    log: Logger,
  ) {
    this.cache = cache;
    this.log = log;
    this.#lanes = controllers.map((controller) => ({
      controller,
      queue: new RateLimitedQueue<string>(),
      pending: new Set<string>(),
      timer: undefined,
      run: undefined,
      lastReconcileMs: 0,
      lastFlushAt: -Infinity,
    }));
    cache.on('change', this.#onChange);
    for (const lane of this.#lanes) lane.controller.bindWake?.(() => this.wake(lane.controller.name));
    // Every replica runs these, leader or not.
    for (const lane of this.#lanes) {
      if (lane.controller.leaderOnly) continue;
      this.#enqueue(lane, resyncChange(cache.revision), 0);
      this.#start(lane, this.#lifetime.signal);
    }
  }

  get leading(): boolean {
    return this.#leadership !== undefined;
  }

  /** Leadership changed: start the leader-only controllers, or cancel everything they do. */
  setLeading(leading: boolean): void {
    if (this.#stopped || leading === this.leading) return;
    if (!leading) {
      this.#leadership!.abort(new Error('this replica stopped leading'));
      this.#leadership = undefined;
      for (const lane of this.#lanes) if (lane.controller.leaderOnly) this.#dropPending(lane);
      return;
    }
    const leadership = new AbortController();
    this.#leadership = leadership;
    for (const lane of this.#lanes) {
      if (!lane.controller.leaderOnly) continue;
      this.#enqueue(lane, resyncChange(this.cache.revision), 0);
      this.#start(lane, leadership.signal);
    }
  }

  /**
   * Runs the lane's workers until `signal` aborts. A run of the last term still winding down (a
   * reconcile stuck in a request that cannot be aborted) does not hold this one up: the queue
   * never hands one key to two workers, whichever run they belong to.
   */
  #start(lane: Lane, signal: AbortSignal): void {
    const run = runController(lane.controller, lane.queue, signal, { log: this.log, onReconciled: (ms) => { lane.lastReconcileMs = ms; } })
      .catch((err: unknown) => this.log.error({ err, controller: lane.controller.name }, 'controller stopped'));
    const previous = lane.run;
    lane.run = previous ? Promise.all([previous, run]).then(() => undefined) : run;
  }

  /** Queues every key of every running controller (a test moved the clock; time-driven work may be due). */
  resyncAll(): void {
    for (const lane of this.#lanes) if (this.#runnable(lane)) this.#enqueue(lane, resyncChange(this.cache.revision));
  }

  /** Queues every key of one controller (fed by a Kubernetes watch rather than the store). */
  wake(name: string): void {
    const lane = this.#lanes.find((l) => l.controller.name === name);
    if (lane && this.#runnable(lane)) this.#enqueue(lane, resyncChange(this.cache.revision));
  }

  /**
   * Resolves once no running controller has a key queued, gathering, being reconciled or about to
   * be retried after meeting a newer write (start-up, tests). Keys waiting on a longer delay (a
   * failure's backoff, a requeue for a window or a drain's next poll) do not count.
   */
  async settle(): Promise<void> {
    const deadline = Date.now() + SETTLE_LIMIT_MS;
    for (;;) {
      for (const lane of this.#lanes) this.#flush(lane);
      const busy = this.#lanes.filter((l) => this.#runnable(l) && (l.queue.len() > 0 || l.queue.processingLen() > 0 || l.queue.delayedDueWithin(2 * CONFLICT_RETRY_MS)));
      if (busy.length === 0) return;
      if (Date.now() > deadline) {
        this.log.warn({ controllers: busy.map((l) => l.controller.name) }, 'controllers still busy after settling for 30 s');
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.cache.off('change', this.#onChange);
    this.#leadership?.abort(new Error('the server is stopping'));
    this.#leadership = undefined;
    this.#lifetime.abort(new Error('the server is stopping'));
    for (const lane of this.#lanes) {
      this.#dropPending(lane);
      lane.queue.shutDown();
    }
    await Promise.all(this.#lanes.map((l) => l.run));
  }

  #runnable(lane: Lane): boolean {
    return !this.#stopped && (!lane.controller.leaderOnly || this.leading);
  }

  #enqueue(lane: Lane, change: CacheChange, coalesceMs = COALESCE_MS): void {
    const before = lane.pending.size;
    enqueueChange(lane.controller, lane.pending, change, this.log);
    if (lane.pending.size === before && lane.timer === undefined) return;
    // A quiet lane takes the first change at once (an Apply waits for its render); changes that
    // come while it works, or right after, gather for a few milliseconds.
    const quiet = lane.timer === undefined && lane.queue.len() === 0 && lane.queue.processingLen() === 0;
    // What is left of the lane's minimum interval since its keys last went out.
    const intervalLeft = (lane.controller.minIntervalMs ?? 0) - (performance.now() - lane.lastFlushAt);
    if (coalesceMs === 0 || (quiet && intervalLeft <= 0)) {
      this.#flush(lane);
      return;
    }
    if (lane.timer !== undefined) return;
    const gather = quiet ? 0 : lane.controller.pacedByCost ? Math.min(MAX_PACED_COALESCE_MS, Math.max(coalesceMs, 2 * lane.lastReconcileMs)) : coalesceMs;
    lane.timer = setTimeout(() => this.#flush(lane), Math.max(gather, intervalLeft));
  }

  #flush(lane: Lane): void {
    clearTimeout(lane.timer);
    lane.timer = undefined;
    if (lane.pending.size > 0) lane.lastFlushAt = performance.now();
    for (const key of lane.pending) lane.queue.add(key);
    lane.pending.clear();
  }

  #dropPending(lane: Lane): void {
    clearTimeout(lane.timer);
    lane.timer = undefined;
    lane.pending.clear();
  }
}
