// Delivers committed events to watchers, replaying a bounded history to a watch that starts at
// an earlier revision. Delivery is always asynchronous and in revision order, as an etcd watch
// stream's is, so code above the store behaves the same on both backends.
//
// Asynchronous means a microtask while the loop is within its turn budget, else the next turn
// (runtime/turn-budget.ts): the cache, the dispatcher and the controllers all run in what a
// delivery starts, and as one long microtask chain that work kept the loop from reading any
// socket until it was all done. A CPU profile of a 1,000-agent fan-out on SQLite showed chains
// of 140-180 ms, and a status read waited for all of them (docs/sizing.md). An etcd watch event
// arrives as I/O anyway.

import { turnIfDue } from '../../runtime/turn-budget.ts';
import type { ChangeEvent, WatchHandlers } from './store.ts';

/** Runs `deliver` as a microtask, or in the next turn of the loop once the turn's budget is spent. */
function deliverSoon(deliver: () => void): void {
  const turn = turnIfDue();
  if (turn) void turn.then(deliver);
  else queueMicrotask(deliver);
}

interface Batch {
  events: ChangeEvent[];
  revision: number;
}

interface Watcher {
  handlers: WatchHandlers;
  queue: Batch[];
  scheduled: boolean;
  after: number;
}

export class WatchFanout {
  #history: Batch[] = [];
  #historyEvents = 0;
  /** Revisions up to this one are no longer in the history. */
  #compacted = 0;
  #watchers = new Set<Watcher>();

  private readonly maxEvents: number;
  constructor(maxEvents: number) {
    this.maxEvents = maxEvents;
  }

  /** The store opened at `revision`: nothing before it can be replayed. */
  start(revision: number): void {
    this.#compacted = revision;
  }

  publish(events: ChangeEvent[], revision: number): void {
    const batch = { events, revision };
    this.#history.push(batch);
    this.#historyEvents += events.length;
    while (this.#historyEvents > this.maxEvents && this.#history.length > 1) {
      const dropped = this.#history.shift()!;
      this.#historyEvents -= dropped.events.length;
      this.#compacted = dropped.revision;
    }
    for (const w of this.#watchers) this.#enqueue(w, batch);
  }

  compact(revision: number): void {
    while (this.#history.length && this.#history[0]!.revision <= revision) {
      this.#historyEvents -= this.#history.shift()!.events.length;
    }
    this.#compacted = Math.max(this.#compacted, revision);
  }

  watch(afterRevision: number, handlers: WatchHandlers): () => void {
    const watcher: Watcher = { handlers, queue: [], scheduled: false, after: afterRevision };
    if (afterRevision < this.#compacted) {
      const compacted = this.#compacted;
      deliverSoon(() => handlers.onCompacted(compacted));
      return () => {};
    }
    for (const batch of this.#history) this.#enqueue(watcher, batch);
    this.#watchers.add(watcher);
    return () => {
      this.#watchers.delete(watcher);
      watcher.queue = [];
    };
  }

  close(): void {
    this.#watchers.clear();
  }

  #enqueue(w: Watcher, batch: Batch): void {
    if (batch.revision <= w.after) return;
    w.queue.push(batch);
    if (w.scheduled) return;
    w.scheduled = true;
    deliverSoon(() => {
      w.scheduled = false;
      const queue = w.queue;
      w.queue = [];
      for (const b of queue) {
        if (!this.#watchers.has(w)) return;
        w.after = b.revision;
        w.handlers.onEvents(b.events, b.revision);
      }
    });
  }
}
