// One store watch on etcd: a Watch stream over the whole prefix from afterRevision + 1, with
// prev_kv so a delete carries the object it removed, and fragment so a response larger than
// etcd's request limit (several 1.4 MiB configs at once) arrives in pieces under gRPC's 4 MiB
// receive limit. Events are grouped by revision (a commit's events share one) and delivered in
// order. When the stream breaks (member killed, member lost its leader) it is opened again on the
// next member from the last delivered revision + 1, so nothing is lost or delivered twice; a
// start revision that etcd compacted ends the watch with onCompacted.

import type { ClientDuplexStream } from '@grpc/grpc-js';
import type { Logger } from '../../runtime/logger.ts';
import type { EtcdKeys } from './etcd-codec.ts';
import { cancelStream, describeGrpcError, type EtcdConnection } from './etcd-connection.ts';
import type { WatchEvent, WatchResponse } from './etcd-proto.ts';
import type { ChangeEvent, WatchHandlers } from './store.ts';

const MAX_BACKOFF_MS = 1_000;

export class EtcdWatch {
  #lastDelivered: number;
  /** etcd's progress notifications: nothing for this watch up to here, so resume after it. */
  #progress = 0;
  #stream: ClientDuplexStream<object, WatchResponse> | undefined;
  #endpoint: string | undefined;
  #fragments: WatchEvent[] = [];
  #createTimer: NodeJS.Timeout | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #failures = 0;
  /** When the current stream was confirmed; a stream that lasted a while resets the backoff. */
  #upSince: number | undefined;
  #ended = false;
  /** When the current stream broke, for the resume time in the log. */
  #brokeAt: number | undefined;

  private readonly connection: EtcdConnection;
  private readonly keys: EtcdKeys;
  private readonly handlers: WatchHandlers;
  private readonly log: Logger;
  private readonly onEnd: (w: EtcdWatch) => void;
  constructor(
    connection: EtcdConnection,
    keys: EtcdKeys,
    afterRevision: number,
    handlers: WatchHandlers,
    log: Logger,
    onEnd: (w: EtcdWatch) => void,
  ) {
    this.connection = connection;
    this.keys = keys;
    this.handlers = handlers;
    this.log = log;
    this.onEnd = onEnd;
    this.#lastDelivered = afterRevision;
    this.#open();
  }

  /** The last revision delivered to the handlers. */
  get lastDelivered(): number {
    return this.#lastDelivered;
  }

  cancel(): void {
    if (this.#ended) return;
    this.#ended = true;
    clearTimeout(this.#createTimer);
    clearTimeout(this.#retryTimer);
    this.#closeStream();
    this.onEnd(this);
  }

  #open(): void {
    if (this.#ended) return;
    if (this.connection.closed) return this.cancel();
    const { stream, endpoint } = this.connection.openStream<object, WatchResponse>('Watch', 'Watch', this.#brokeAt !== undefined ? this.#endpoint : undefined);
    this.#stream = stream;
    this.#endpoint = endpoint;
    this.#fragments = [];
    let created = false;
    stream.on('data', (res: WatchResponse) => {
      if (stream !== this.#stream) return;
      if (res.created && !res.canceled) {
        created = true;
        clearTimeout(this.#createTimer);
        this.#upSince = Date.now();
        if (this.#brokeAt !== undefined) {
          this.log.info({ endpoint, fromRevision: this.#lastDelivered + 1, resumeMs: Date.now() - this.#brokeAt }, 'etcd watch resumed');
          this.#brokeAt = undefined;
        }
      }
      this.#onResponse(res, endpoint);
    });
    stream.on('error', (err) => {
      if (stream === this.#stream) this.#broken(endpoint, describeGrpcError(err));
    });
    stream.on('end', () => {
      if (stream === this.#stream) this.#broken(endpoint, 'stream ended');
    });
    // A member that accepts the stream but never confirms the watch (no leader, overloaded) is
    // as good as lost.
    this.#createTimer = setTimeout(() => {
      if (!created && stream === this.#stream) this.#broken(endpoint, `no answer within ${this.connection.deadlineMs} ms`);
    }, this.connection.deadlineMs);
    stream.write({
      create_request: {
        key: this.keys.prefixKey,
        range_end: this.keys.prefixEnd,
        start_revision: String(Math.max(this.#lastDelivered, this.#progress) + 1),
        prev_kv: true,
        fragment: true,
        progress_notify: true,
      },
    });
  }

  #onResponse(res: WatchResponse, endpoint: string): void {
    if (res.canceled) {
      const compacted = Number(res.compact_revision);
      if (compacted > 0) {
        this.log.warn({ endpoint, compactRevision: compacted, fromRevision: this.#lastDelivered + 1 }, 'etcd watch start revision was compacted');
        this.cancel();
        try {
          this.handlers.onCompacted(compacted);
        } catch (err) {
          this.log.error({ err }, 'a watch onCompacted handler threw');
        }
        return;
      }
      this.#broken(endpoint, `watch cancelled by etcd: ${res.cancel_reason || 'no reason given'}`);
      return;
    }
    if (res.events.length === 0 && this.#fragments.length === 0) {
      // A progress notification (etcd sends one only once the watcher has caught up): a resume
      // can start after it, which keeps an idle watch clear of compaction.
      if (!res.created) this.#progress = Math.max(this.#progress, Number(res.header.revision));
      return;
    }
    this.#fragments.push(...res.events);
    if (res.fragment) return;
    const events = this.#fragments;
    this.#fragments = [];
    this.#deliver(events);
  }

  #deliver(raw: WatchEvent[]): void {
    const batches = new Map<number, ChangeEvent[]>();
    for (const ev of raw) {
      // For a put and a delete alike, kv.mod_revision is the revision of the change.
      const revision = Number(ev.kv.mod_revision);
      if (revision <= this.#lastDelivered) continue;
      const event = this.#toChange(ev, revision);
      if (!event) continue;
      let batch = batches.get(revision);
      if (!batch) batches.set(revision, (batch = []));
      batch.push(event);
    }
    for (const revision of [...batches.keys()].sort((a, b) => a - b)) {
      if (this.#ended) return;
      this.#lastDelivered = revision;
      try {
        this.handlers.onEvents(batches.get(revision)!, revision);
      } catch (err) {
        this.log.error({ err, revision }, 'a watch handler threw; the watch goes on');
      }
    }
  }

  #toChange(ev: WatchEvent, revision: number): ChangeEvent | undefined {
    if (ev.type === 'PUT') {
      const object = this.keys.toObject(ev.kv);
      return object && { type: 'put', object };
    }
    // The deleted object as it was, with the delete's revision, as the SQLite store gives it.
    const before = ev.prev_kv ?? undefined;
    const object = before ? this.keys.toObject(before, String(revision)) : undefined;
    if (object) return { type: 'delete', object };
    const id = this.keys.parse(ev.kv.key);
    if (!id) return undefined;
    this.log.warn({ key: ev.kv.key.toString(), revision }, 'etcd delete event without the previous value (compacted)');
    return { type: 'delete', object: { ...id, value: undefined, resourceVersion: String(revision), createdAt: 0 } };
  }

  #broken(endpoint: string, why: string): void {
    if (this.#ended) return;
    clearTimeout(this.#createTimer);
    this.#closeStream();
    this.connection.markFailed(endpoint);
    this.#brokeAt ??= Date.now();
    if (this.#upSince !== undefined && Date.now() - this.#upSince > 2_000) this.#failures = 0;
    this.#upSince = undefined;
    this.#failures++;
    this.log.warn({ endpoint, why, resumeFrom: Math.max(this.#lastDelivered, this.#progress) + 1 }, 'etcd watch stream broke; resuming on the next member');
    // The first retry goes straight to the next member; after a full round of failures, back off.
    const delay = this.#failures <= 1 ? 0 : Math.min(MAX_BACKOFF_MS, 50 * 2 ** Math.min(this.#failures, 6));
    this.#retryTimer = setTimeout(() => this.#open(), delay);
  }

  #closeStream(): void {
    const stream = this.#stream;
    this.#stream = undefined;
    if (stream) cancelStream(stream);
  }
}
