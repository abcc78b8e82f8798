// StatusService.Watch that survives a server restart: on a lost stream it waits (exponential
// backoff with jitter), says so on stderr, reconnects, and hands the caller the full state
// again so it can tell what changed meanwhile. It gives up, with the reason, on errors a retry
// cannot fix (credentials, permissions) or after `giveUpAfterMs` without a connection; it never
// ends quietly.

import { Metadata, status as Status, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import { RemoteCallError } from '../../machineconfig/errors.ts';
import type { WatchEvent__Output } from '../../runtime/generated/mcplane/v1/WatchEvent.ts';
import { describeFailure, explain } from './call.ts';
import type { Clients } from './connection.ts';

export interface WatchOptions {
  pools: boolean;
  nodes: boolean;
  /** Events (kubectl get events -w); only when asked for. */
  events?: boolean;
  /** The current state (every ADDED event up to SYNCED): on connecting, and again after each reconnect. */
  onSnapshot(events: WatchEvent__Output[]): void;
  /** Each change after the snapshot, in the order the server sent them. */
  onChange(event: WatchEvent__Output): void;
  /** Lines for stderr: lost, reconnecting, reconnected. */
  notice(text: string): void;
  giveUpAfterMs?: number;
}

export interface WatchHandle {
  /** Resolves when stop() is called; rejects with the reason when the watch cannot go on. */
  done: Promise<void>;
  stop(): void;
}

export const DEFAULT_GIVE_UP_AFTER_MS = 5 * 60_000;
const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 10_000;

// Statuses a new connection cannot fix: stop at once and say why.
const FATAL = new Set<number>([Status.UNAUTHENTICATED, Status.PERMISSION_DENIED, Status.UNIMPLEMENTED, Status.INVALID_ARGUMENT, Status.NOT_FOUND, Status.FAILED_PRECONDITION]);

type Failure = Pick<ServiceError, 'code' | 'details'> & { metadata?: Metadata };

export function watchWithReconnect(c: Clients, o: WatchOptions): WatchHandle {
  const giveUpAfterMs = o.giveUpAfterMs ?? DEFAULT_GIVE_UP_AFTER_MS;
  let stopped = false;
  let everSynced = false;
  let attempt = 0;
  let lostSince = 0;
  let stream: ClientReadableStream<WatchEvent__Output> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let resolveDone!: () => void;
  let rejectDone!: (err: Error) => void;
  const done = new Promise<void>((resolve, reject) => { resolveDone = resolve; rejectDone = reject; });

  const finish = (err?: Error): void => {
    if (stopped) return;
    stopped = true;
    clearTimeout(timer);
    stream?.cancel();
    if (err) rejectDone(err);
    else resolveDone();
  };

  const lost = (failure: Failure): void => {
    if (stopped) return;
    const err = explain(failure, c, 'watch');
    // The first connection fails fast, like any other command: nothing was watched yet.
    if (FATAL.has(failure.code) || !everSynced) return finish(err);
    lostSince ||= Date.now();
    if (Date.now() - lostSince > giveUpAfterMs) {
      return finish(new RemoteCallError(`watch: gave up after ${Math.round((Date.now() - lostSince) / 1000)}s without a connection to ${c.statusServer}: ${err.message}`, failure.code));
    }
    attempt++;
    const delay = Math.round(Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** (attempt - 1)) * (0.8 + Math.random() * 0.4));
    o.notice(`mcctl: lost the watch on ${c.statusServer} (${describeFailure(failure, c)}); reconnecting in ${(delay / 1000).toFixed(1)}s (attempt ${attempt})\n`);
    timer = setTimeout(open, delay);
  };

  // No waitForReady first: a stream on a channel that cannot connect fails at once with the
  // socket's or TLS's own reason, which explain() turns into a likely cause.
  const open = (): void => {
    {
      const s = c.status.watch({ pools: o.pools, nodes: o.nodes, events: o.events ?? false });
      stream = s;
      let snapshot: WatchEvent__Output[] | undefined = [];
      let ended = false;
      const end = (failure: Failure): void => {
        if (ended) return;
        ended = true;
        lost(failure);
      };
      s.on('data', (e: WatchEvent__Output) => {
        if (stopped) return;
        if (!snapshot) return o.onChange(e);
        if (e.type !== 'SYNCED') return void snapshot.push(e);
        const events = snapshot;
        snapshot = undefined;
        if (attempt > 0) o.notice(`mcctl: reconnected to ${c.statusServer}\n`);
        everSynced = true;
        attempt = 0;
        lostSince = 0;
        o.onSnapshot(events);
      });
      // CANCELLED here was not asked for by us (stop() sets `stopped` first): the server went away.
      s.on('error', (e: ServiceError) => end(e));
      s.on('end', () => end({ code: Status.UNAVAILABLE, details: 'the server closed the stream' }));
    }
  };

  open();
  return { done, stop: () => finish() };
}
