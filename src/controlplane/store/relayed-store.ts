// The Store on the far side of a relay (store-relay.ts): lists, watches and gets answered by the
// thread that owns the real store, over a MessagePort. Read-only: whoever holds this serves
// reads, and writes stay with the replica's main thread, where the leader's fencing and the
// sessions are. One ClusterCache is its one watcher.

import { StoreUnavailableError } from '../../machineconfig/index.ts';
import type { RelayMessage, RelayPort, RelayRequest } from './store-relay.ts';
import type { ChangeEvent, CommitResult, Lease, ListResult, Store, StoredKind, StoredObject, WatchHandlers } from './store.ts';
import type { StoredValue } from './stored-records.ts';

const GET_TIMEOUT_MS = 10_000;

export class RelayedStore implements Store {
  #pendingList: { resolve: (result: ListResult) => void; reject: (err: Error) => void }[] = [];
  /** Events after the last list, held until the watch that follows the list starts. */
  #held: { events: ChangeEvent[]; revision: number }[] | undefined;
  #watch: WatchHandlers | undefined;
  /** A compaction that came before the watch it ends started. */
  #compactedEarly: number | undefined;
  #gets = new Map<number, { resolve: (o: StoredObject | undefined) => void; reject: (err: Error) => void }>();
  #nextId = 1;
  readonly #onMessage = (raw: unknown): void => this.#receive(raw as RelayMessage);

  readonly backend: Store['backend'];
  private readonly port: RelayPort;
  constructor(backend: Store['backend'], port: RelayPort) {
    this.backend = backend;
    this.port = port;
    port.on('message', this.#onMessage);
  }

  list(kinds?: readonly StoredKind[]): Promise<ListResult> {
    return new Promise((resolve, reject) => {
      this.#pendingList.push({ resolve: (result) => resolve(kinds ? { revision: result.revision, items: result.items.filter((o) => kinds.includes(o.kind)) } : result), reject });
      if (this.#pendingList.length === 1) this.#send({ t: 'list' });
    });
  }

  watch(afterRevision: number, handlers: WatchHandlers): () => void {
    const compacted = this.#compactedEarly;
    this.#compactedEarly = undefined;
    if (compacted !== undefined) {
      this.#held = undefined;
      queueMicrotask(() => handlers.onCompacted(compacted));
      return () => undefined;
    }
    this.#watch = handlers;
    const held = this.#held ?? [];
    this.#held = undefined;
    for (const batch of held) if (batch.revision > afterRevision) handlers.onEvents(batch.events, batch.revision);
    return () => {
      if (this.#watch === handlers) this.#watch = undefined;
    };
  }

  get<K extends StoredKind>(kind: K, name: string): Promise<StoredObject<StoredValue<K>> | undefined> {
    const id = this.#nextId++;
    return new Promise<StoredObject<StoredValue<K>> | undefined>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#gets.delete(id);
        reject(new StoreUnavailableError(`the replica's main thread did not answer a read of ${kind}/${name} within ${GET_TIMEOUT_MS / 1000} s`));
      }, GET_TIMEOUT_MS);
      this.#gets.set(id, {
        resolve: (o) => { clearTimeout(timer); resolve(o as StoredObject<StoredValue<K>> | undefined); },
        reject: (err) => { clearTimeout(timer); reject(err); },
      });
      this.#send({ t: 'get', id, kind, name });
    });
  }

  commit(): Promise<CommitResult> {
    return Promise.reject(readOnly('commit'));
  }

  grantLease(): Promise<Lease> {
    return Promise.reject(readOnly('grantLease'));
  }

  async close(): Promise<void> {
    this.port.off('message', this.#onMessage);
    this.#watch = undefined;
    for (const get of this.#gets.values()) get.reject(new StoreUnavailableError('the relayed store was closed'));
    this.#gets.clear();
    for (const { reject } of this.#pendingList.splice(0)) reject(new StoreUnavailableError('the relayed store was closed'));
  }

  #send(request: RelayRequest): void {
    this.port.postMessage(request);
  }

  #receive(message: RelayMessage): void {
    switch (message.t) {
      case 'list': {
        const waiting = this.#pendingList;
        this.#pendingList = [];
        // The watch that follows this list starts after the caller's await: hold what comes first.
        this.#held = [];
        const items = JSON.parse(message.items) as StoredObject[];
        for (const { resolve } of waiting) resolve({ items, revision: message.revision });
        return;
      }
      case 'list-failed': {
        const waiting = this.#pendingList;
        this.#pendingList = [];
        for (const { reject } of waiting) reject(new StoreUnavailableError(`listing the store failed: ${message.message}`));
        return;
      }
      case 'events': {
        const events = JSON.parse(message.events) as ChangeEvent[];
        if (this.#held) this.#held.push({ events, revision: message.revision });
        else this.#watch?.onEvents(events, message.revision);
        return;
      }
      case 'compacted': {
        if (this.#held) {
          this.#held = undefined;
          this.#compactedEarly = message.compacted;
          return;
        }
        const watch = this.#watch;
        this.#watch = undefined;
        watch?.onCompacted(message.compacted);
        return;
      }
      case 'got': {
        const get = this.#gets.get(message.id);
        this.#gets.delete(message.id);
        if (!get) return;
        if (message.error !== undefined) get.reject(new StoreUnavailableError(message.error));
        else get.resolve(message.object);
        return;
      }
    }
  }
}

function readOnly(call: string): StoreUnavailableError {
  return new StoreUnavailableError(`${call}: this store is a read-only relay; writes go through the replica's main thread`);
}
