// The keyed work queue a controller's workers take keys from: client-go's workqueue contract
// (k8s.io/client-go/util/workqueue), which is what lets a controller run several workers without
// two of them ever reconciling the same pool or node at once. Interfaces only; the implementation
// is rate-limited-queue.ts, so a test or a future queue (one fed across worker threads) can stand
// in without the controllers noticing.
//
// The rules every implementation keeps:
// - add(key) while the key waits in the queue does nothing: a burst of changes to one node (5,000
//   agents reporting Done) becomes one reconcile, not 5,000.
// - get() hands a key out to one worker; until that worker calls done(key) no other get() returns
//   it. An add(key) meanwhile marks it dirty, and done(key) puts it back, so the change that came
//   in during the reconcile is never lost and never raced.
// - shutDown() refuses new keys and wakes every waiting get() with undefined once the queue is
//   empty (keys already queued are still handed out, as in client-go).

export interface WorkQueue<K> {
  /** Queues `key` unless it is already queued; marks it dirty if a worker holds it. */
  add(key: K): void;
  /**
   * The next key, marked as being processed until done(key); undefined when the queue is shut
   * down and empty, or when `signal` aborts first (the worker is being stopped).
   */
  get(signal?: AbortSignal): Promise<K | undefined>;
  /** The worker is finished with `key`: if it was added meanwhile, it is queued again. */
  done(key: K): void;
  /** Keys waiting to be handed out (not those being processed, nor those waiting on a delay). */
  len(): number;
  shutDown(): void;
  shuttingDown(): boolean;
}

export interface DelayingQueue<K> extends WorkQueue<K> {
  /**
   * Adds `key` after `ms`. A key already waiting keeps the earlier of its two times, so a
   * requeue asked for in 6 hours does not push back one due in 5 ms.
   */
  addAfter(key: K, ms: number): void;
}

/** How long a key waits before its next try, from how often it has failed since it was forgotten. */
export interface KeyRateLimiter<K> {
  /** Counts a failure of `key` and returns how long to wait before trying it again. */
  when(key: K): number;
  /** `key` succeeded: its next failure starts again from the shortest wait. */
  forget(key: K): void;
  /** Failures counted for `key` since it was last forgotten. */
  numRequeues(key: K): number;
}

export interface RateLimitingQueue<K> extends DelayingQueue<K> {
  /** Adds `key` after its rate limiter's wait: a failed reconcile backs off per key. */
  addRateLimited(key: K): void;
  /** Resets `key`'s backoff (after a successful reconcile). */
  forget(key: K): void;
  numRequeues(key: K): number;
}
