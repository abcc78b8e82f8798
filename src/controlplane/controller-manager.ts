// Runs controllers one at a time, never two passes at once, each when a change it cares about
// reached the cache (or its requeue time came), and coalesces bursts of changes (5,000 agents
// reporting Done within a second) into a few passes. Leader-only controllers run only while
// this replica leads; becoming leader runs them all once, since anything may have changed.

import type { Logger } from '../runtime/logger.ts';
import type { CacheChange, ClusterCache } from './cluster-cache.ts';
import type { Controller } from './controller.ts';

const COALESCE_MS = 20;
/** After a failed reconcile, try again after this long (the next change may come sooner). */
const RETRY_AFTER_FAILURE_MS = 1000;

export class ControllerManager {
  #dirty = new Set<Controller>();
  #timers = new Map<Controller, NodeJS.Timeout>();
  #scheduled: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  #leading = false;
  readonly #onChange = (change: CacheChange): void => {
    for (const c of this.controllers) if (change.resync || c.interestedIn(change)) this.#dirty.add(c);
    if (this.#dirty.size) this.schedule();
  };

  constructor(
    private readonly controllers: readonly Controller[],
    private readonly cache: ClusterCache,
    private readonly log: Logger,
  ) {
    cache.on('change', this.#onChange);
    for (const c of controllers) this.#dirty.add(c);
    for (const c of controllers) {
      c.bindWake?.(() => {
        this.#dirty.add(c);
        this.schedule();
      });
    }
  }

  get leading(): boolean {
    return this.#leading;
  }

  /** Leadership changed: start or stop the leader-only controllers. */
  setLeading(leading: boolean): void {
    if (this.#leading === leading) return;
    this.#leading = leading;
    if (leading) {
      for (const c of this.controllers) this.#dirty.add(c);
      this.schedule();
    }
  }

  schedule(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#scheduled ??= setTimeout(() => {
      this.#scheduled = undefined;
      if (this.#running) this.#again = true;
      else void this.#start();
    }, COALESCE_MS);
  }

  /** Runs every controller again (a test moved the clock; time-driven work may be due). */
  resyncAll(): void {
    for (const c of this.controllers) this.#dirty.add(c);
    this.schedule();
  }

  /** Runs passes until nothing is dirty (start-up, tests). */
  async settle(): Promise<void> {
    clearTimeout(this.#scheduled);
    this.#scheduled = undefined;
    for (let i = 0; i < 20; i++) {
      while (this.#running) await this.#running;
      if (!this.#hasRunnable()) return;
      await this.#start();
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.cache.off('change', this.#onChange);
    clearTimeout(this.#scheduled);
    for (const t of this.#timers.values()) clearTimeout(t);
    await this.#running;
  }

  #hasRunnable(): boolean {
    return [...this.#dirty].some((c) => !c.leaderOnly || this.#leading);
  }

  /** The only place a pass starts, so two passes never overlap. */
  #start(): Promise<void> {
    this.#running = this.#run().finally(() => {
      this.#running = undefined;
      if (this.#again || this.#hasRunnable()) {
        this.#again = false;
        if (this.#hasRunnable()) this.schedule();
      }
    });
    return this.#running;
  }

  async #run(): Promise<void> {
    for (const c of this.controllers) {
      if (this.#stopped) return;
      if (!this.#dirty.has(c) || (c.leaderOnly && !this.#leading)) continue;
      this.#dirty.delete(c);
      try {
        const result = await c.reconcile();
        if (result?.requeueAfterMs !== undefined) this.#requeue(c, result.requeueAfterMs);
      } catch (err) {
        // A failing controller must not stop the others or the loop: retry it shortly.
        this.log.error({ err, controller: c.name }, 'reconcile failed; retrying');
        this.#requeue(c, RETRY_AFTER_FAILURE_MS);
      }
    }
  }

  #requeue(c: Controller, afterMs: number): void {
    clearTimeout(this.#timers.get(c));
    this.#timers.set(c, setTimeout(() => {
      this.#timers.delete(c);
      this.#dirty.add(c);
      this.schedule();
    }, afterMs));
  }
}
