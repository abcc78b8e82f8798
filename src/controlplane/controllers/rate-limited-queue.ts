// The workqueue of workqueue.ts, in one class: a FIFO of keys with client-go's dirty/processing
// sets, per-key delays, and per-key exponential backoff. Pure TypeScript; every timer is unref'd,
// so a queue holding a key due in 6 hours never keeps a test or a stopping server alive.

import type { KeyRateLimiter, RateLimitingQueue } from './workqueue.ts';

/** client-go's DefaultControllerRateLimiter: 5 ms after the first failure... */
export const DEFAULT_BASE_DELAY_MS = 5;
/** ...doubling per failure, up to this (client-go goes to 1000 s; a control plane of hosts wants
 * a broken pool retried well before an operator gives up on it). */
export const DEFAULT_MAX_DELAY_MS = 30_000;

/**
 * client-go's ItemExponentialFailureRateLimiter: base * 2^failures, capped at max, counted per
 * key, so one node whose drain keeps failing backs off without slowing any other node.
 */
export class ExponentialBackoff<K> implements KeyRateLimiter<K> {
  #failures = new Map<K, number>();

  private readonly baseMs: number;
  private readonly maxMs: number;
  constructor(
    baseMs: number = DEFAULT_BASE_DELAY_MS,
    maxMs: number = DEFAULT_MAX_DELAY_MS,
  ) {
    this.baseMs = baseMs;
    this.maxMs = maxMs;
    if (!(baseMs > 0) || !(maxMs >= baseMs)) throw new RangeError(`backoff needs 0 < base (${baseMs}) <= max (${maxMs})`);
  }

  when(key: K): number {
    const failures = this.#failures.get(key) ?? 0;
    this.#failures.set(key, failures + 1);
    // 2 ** 1100 is Infinity, not an overflow: the cap still applies.
    return Math.min(this.maxMs, this.baseMs * 2 ** failures);
  }

  forget(key: K): void {
    this.#failures.delete(key);
  }

  numRequeues(key: K): number {
    return this.#failures.get(key) ?? 0;
  }
}

interface Waiter<K> {
  resolve(key: K | undefined): void;
}

interface Delayed {
  at: number;
  timer: NodeJS.Timeout;
}

export interface RateLimitedQueueOptions<K> {
  rateLimiter?: KeyRateLimiter<K>;
}

export class RateLimitedQueue<K extends {}> implements RateLimitingQueue<K> {
  // A FIFO as an array read from `#head`: shift() is O(n), and 10,000 node keys queued by one
  // resync would make every get() walk them.
  #queue: K[] = [];
  #head = 0;
  /** Keys that need processing: queued, or added again while a worker holds them. */
  #dirty = new Set<K>();
  /** Keys a worker holds (between get and done). */
  #processing = new Set<K>();
  #waiters: Waiter<K>[] = [];
  #delayed = new Map<K, Delayed>();
  #shuttingDown = false;
  readonly #limiter: KeyRateLimiter<K>;

  constructor(options: RateLimitedQueueOptions<K> = {}) {
    this.#limiter = options.rateLimiter ?? new ExponentialBackoff<K>();
  }

  add(key: K): void {
    if (this.#shuttingDown || this.#dirty.has(key)) return;
    this.#dirty.add(key);
    // Held by a worker: done(key) queues it, so two workers never hold one key.
    if (this.#processing.has(key)) return;
    this.#queue.push(key);
    this.#handOut();
  }

  get(signal?: AbortSignal): Promise<K | undefined> {
    if (signal?.aborted) return Promise.resolve(undefined);
    const key = this.#take();
    if (key !== undefined || this.#shuttingDown) return Promise.resolve(key);
    return new Promise((resolve) => {
      const waiter: Waiter<K> = {
        resolve: (k) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(k);
        },
      };
      const onAbort = (): void => {
        const i = this.#waiters.indexOf(waiter);
        // Already handed a key (it resolved first): the worker gets it and must call done().
        if (i < 0) return;
        this.#waiters.splice(i, 1);
        resolve(undefined);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  done(key: K): void {
    if (!this.#processing.delete(key)) return;
    if (this.#dirty.has(key) && !this.#shuttingDown) {
      this.#queue.push(key);
      this.#handOut();
    }
  }

  len(): number {
    return this.#queue.length - this.#head;
  }

  addAfter(key: K, ms: number): void {
    if (this.#shuttingDown) return;
    if (!(ms > 0)) {
      this.add(key);
      return;
    }
    const at = Date.now() + ms;
    const waiting = this.#delayed.get(key);
    if (waiting && waiting.at <= at) return;
    if (waiting) clearTimeout(waiting.timer);
    const timer = setTimeout(() => {
      this.#delayed.delete(key);
      this.add(key);
    }, ms);
    timer.unref();
    this.#delayed.set(key, { at, timer });
  }

  addRateLimited(key: K): void {
    this.addAfter(key, this.#limiter.when(key));
  }

  forget(key: K): void {
    this.#limiter.forget(key);
  }

  numRequeues(key: K): number {
    return this.#limiter.numRequeues(key);
  }

  /** Keys a worker holds now (between get and done). */
  processingLen(): number {
    return this.#processing.size;
  }

  /** Keys waiting on a delay (addAfter, addRateLimited) that have not come due. */
  delayedLen(): number {
    return this.#delayed.size;
  }

  /** Whether a key waiting on a delay comes due within `ms` (a quick retry, not a requeue for later). */
  delayedDueWithin(ms: number): boolean {
    const by = Date.now() + ms;
    for (const d of this.#delayed.values()) if (d.at <= by) return true;
    return false;
  }

  shutDown(): void {
    if (this.#shuttingDown) return;
    this.#shuttingDown = true;
    for (const d of this.#delayed.values()) clearTimeout(d.timer);
    this.#delayed.clear();
    // Waiters exist only while the queue is empty, so every one of them is woken with nothing.
    for (const w of this.#waiters.splice(0)) w.resolve(undefined);
  }

  shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  #take(): K | undefined {
    if (this.#head >= this.#queue.length) return undefined;
    const key = this.#queue[this.#head++]!;
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
    this.#dirty.delete(key);
    this.#processing.add(key);
    return key;
  }

  /** Gives queued keys straight to waiting workers, oldest waiter first. */
  #handOut(): void {
    while (this.#waiters.length > 0) {
      const key = this.#take();
      if (key === undefined) return;
      this.#waiters.shift()!.resolve(key);
    }
  }
}
