// The store, relayed to another thread: what the status thread's cache is fed by. The thread that
// owns the store lists it and watches it once more for the other side, and posts what it sees
// over a MessagePort; `RelayedStore` (relayed-store.ts) is the Store the other side builds its
// ClusterCache on. Both backends go through here: SQLite's file has one writer (this thread) and
// its watch is in-process, and for etcd one watch more costs less than a second client.
// Messages keep the store's order (a MessagePort is FIFO), so a list and the events after it
// arrive as a watch would deliver them.
// Lists and events cross as JSON text: posting the objects cost a structured clone of every
// NodeStatus written, on every replica (50 µs a report on the main thread in the etcd profiles,
// 4-5 times what JSON.stringify takes, and the thread's deserializing 4 times a JSON.parse).
// Stored values are JSON in both stores, so the text loses nothing a relist would keep.

import type { ChangeEvent, StoredKind, StoredObject, Store } from './store.ts';

/** What the store's side sends. */
export type RelayMessage =
  | { t: 'list'; items: string; revision: number }
  | { t: 'events'; events: string; revision: number }
  | { t: 'compacted'; compacted: number }
  | { t: 'list-failed'; message: string }
  | { t: 'got'; id: number; object?: StoredObject; error?: string };

/** What the relayed side asks. */
export type RelayRequest =
  | { t: 'list' }
  | { t: 'get'; id: number; kind: StoredKind; name: string };

/** A MessagePort, or anything with its two calls (tests use a MessageChannel). */
export interface RelayPort {
  postMessage(message: unknown): void;
  on(event: 'message', listener: (message: unknown) => void): unknown;
  off(event: 'message', listener: (message: unknown) => void): unknown;
}

export interface StoreRelay {
  /** Ends the watch; the other side's watch sees nothing more. */
  stop(): void;
}

/**
 * Answers the other side's requests from `store`: a list (each one restarts the watch from the
 * list's revision, so a relist after a compaction picks up from there) and single gets.
 */
export function relayStore(store: Store, kinds: readonly StoredKind[], port: RelayPort, onError: (err: unknown) => void): StoreRelay {
  let unwatch: (() => void) | undefined;
  let stopped = false;
  const post = (message: RelayMessage): void => {
    if (!stopped) port.postMessage(message);
  };
  const list = async (): Promise<void> => {
    unwatch?.();
    unwatch = undefined;
    const { items, revision } = await store.list(kinds);
    if (stopped) return;
    post({ t: 'list', items: JSON.stringify(items), revision });
    unwatch = store.watch(revision, {
      onEvents: (events, rev) => {
        // Only the kinds listed: the other side's cache holds nothing else.
        const wanted = events.filter((e) => kinds.includes(e.object.kind));
        if (wanted.length) post({ t: 'events', events: JSON.stringify(wanted), revision: rev });
      },
      onCompacted: (compacted) => {
        unwatch = undefined;
        post({ t: 'compacted', compacted });
      },
    });
  };
  // One list at a time: the other side asks again only after an answer (RelayedStore), and a
  // second list overlapping the first would leave the first's watch running.
  let listing: Promise<void> | undefined;
  const onMessage = (raw: unknown): void => {
    const request = raw as RelayRequest;
    if (request.t === 'list') {
      const previous = listing ?? Promise.resolve();
      listing = previous.then(list).catch((err: unknown) => {
        onError(err);
        post({ t: 'list-failed', message: messageOf(err) });
      });
    } else if (request.t === 'get') {
      store.get(request.kind, request.name).then(
        (object) => post({ t: 'got', id: request.id, ...(object ? { object } : {}) }),
        (err: unknown) => post({ t: 'got', id: request.id, error: messageOf(err) }),
      );
    }
  };
  port.on('message', onMessage);
  return {
    stop() {
      stopped = true;
      unwatch?.();
      port.off('message', onMessage);
    },
  };
}

/** A rejection's words, whatever was thrown; never empty, so the other side never reads "found nothing". */
function messageOf(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)) || 'the store failed without saying why';
}
