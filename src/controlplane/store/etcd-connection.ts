// The store's way to etcd: one gRPC channel per member endpoint and a preferred member that every
// call tries first. A call that gets UNAVAILABLE or DEADLINE_EXCEEDED (member killed, partitioned,
// without a leader) moves on to the next member, within one overall deadline, so a lost member
// costs one failed attempt and a call never hangs.
//
// One channel per endpoint rather than one grpc-js channel over `ipv4:a,b,c` with round_robin or
// pick_first: the store must know which member a stream is on to resume it elsewhere, must move
// every call away from a member that answers "no leader" (a live TCP connection the balancer
// would keep using), and endpoints may be host names, which the ipv4: scheme does not take.

import { credentials, Metadata, status, type CallOptions, type ChannelCredentials, type ChannelOptions, type Client, type ClientDuplexStream, type ServiceError } from '@grpc/grpc-js';
import { StoreUnavailableError } from '../../machineconfig/index.ts';
import { loadEtcdServices, type EtcdClients, type EtcdServiceName } from './etcd-proto.ts';

export interface EtcdTls {
  ca: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

const CHANNEL_OPTIONS: ChannelOptions = {
  // A killed member is found at once (connection refused); a silent one by keepalive. etcd
  // refuses pings more often than every 5 s (--grpc-keepalive-min-time).
  'grpc.keepalive_time_ms': 10_000,
  'grpc.keepalive_timeout_ms': 5_000,
  // A restarted member is used again within a second or so.
  'grpc.initial_reconnect_backoff_ms': 200,
  'grpc.max_reconnect_backoff_ms': 1_000,
  // etcd accepts requests up to 1.5 MiB (--max-request-bytes); the default receive limit of
  // 4 MiB stays: list pages and watch fragments are sized to fit it.
  'grpc.max_send_message_length': 2 * 1024 * 1024,
};

/**
 * Answers after which another member (or the same one, a moment later) may answer: the member
 * is down, has no leader, timed out; etcd gives UNKNOWN "context deadline exceeded" when the
 * deadline it was sent runs out inside it, and RESOURCE_EXHAUSTED "too many requests" when its
 * apply queue is full.
 */
export function isRetryable(err: unknown): boolean {
  const e = err as ServiceError;
  switch (e?.code) {
    case status.UNAVAILABLE:
    case status.DEADLINE_EXCEEDED:
      return true;
    case status.UNKNOWN:
      return /context deadline exceeded|context canceled/.test(e.details ?? '');
    case status.RESOURCE_EXHAUSTED:
      return /too many requests/.test(e.details ?? '');
    default:
      return false;
  }
}

export function describeGrpcError(err: unknown): string {
  const e = err as ServiceError;
  if (!e || typeof e.code !== 'number') return String(err);
  // grpc-js appends an empty "Resolution note" to connection failures.
  const details = (e.details || e.message).replace(/\.?\s*Resolution note:\s*$/, '');
  return `${status[e.code]}: ${details}`;
}

/** Ends a stream the caller no longer wants, without its cancellation being reported as an error. */
export function cancelStream(stream: { removeAllListeners(event: string): unknown; on(event: 'error', listener: () => void): unknown; cancel(): void }): void {
  stream.removeAllListeners('data');
  stream.on('error', () => { /* cancelled on purpose */ });
  try {
    stream.cancel();
  } catch { /* already closed */ }
}

interface Member {
  endpoint: string;
  clients: EtcdClients;
}

export class EtcdConnection {
  readonly endpoints: readonly string[];
  readonly deadlineMs: number;
  #members: Member[];
  #preferred = 0;
  #closed = false;

  constructor(endpoints: readonly string[], tls: EtcdTls | undefined, deadlineMs: number) {
    this.endpoints = endpoints;
    this.deadlineMs = deadlineMs;
    const services = loadEtcdServices();
    const creds: ChannelCredentials = tls ? credentials.createSsl(tls.ca, tls.key ?? null, tls.cert ?? null) : credentials.createInsecure();
    this.#members = endpoints.map((endpoint) => {
      // The four services share one channel (one HTTP/2 connection) per member.
      const kv = new services.KV(endpoint, creds, CHANNEL_OPTIONS);
      const channelOverride = kv.getChannel();
      const clients: EtcdClients = {
        KV: kv,
        Watch: new services.Watch(endpoint, creds, { channelOverride }),
        Lease: new services.Lease(endpoint, creds, { channelOverride }),
        Maintenance: new services.Maintenance(endpoint, creds, { channelOverride }),
      };
      return { endpoint, clients };
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * One unary call, on the preferred member first and then on the others, within the overall
   * deadline. Errors other than UNAVAILABLE/DEADLINE_EXCEEDED are etcd's answer and are thrown
   * as they are (a ServiceError); running out of members and time is a StoreUnavailableError.
   */
  async unary<Res>(service: EtcdServiceName, method: string, request: object, what: string, deadlineMs = this.deadlineMs): Promise<Res> {
    const start = Date.now();
    const end = start + deadlineMs;
    const failures = new Map<string, string>();
    for (let round = 0; ; round++) {
      const order = this.#order();
      for (let i = 0; i < order.length; i++) {
        if (this.#closed) throw new StoreUnavailableError(`etcd ${what}: the store is closed`);
        const remaining = end - Date.now();
        if (remaining <= 0) break;
        const index = order[i]!;
        const member = this.#members[index]!;
        // Each member left in this round gets its share of the time left: one that hangs cannot
        // use up the time the others need.
        const attemptMs = round === 0 ? remaining / (order.length - i) : remaining;
        try {
          const response = await callUnary<Res>(member.clients[service], method, request, attemptMs);
          this.#preferred = index;
          return response;
        } catch (err) {
          if (!isRetryable(err)) throw err;
          failures.set(member.endpoint, describeGrpcError(err));
        }
      }
      const remaining = end - Date.now();
      if (remaining <= 0 || this.#closed) break;
      // Every member failed fast (refused, no leader yet): an election may be under way.
      await new Promise((r) => setTimeout(r, Math.min(100 * (round + 1), remaining)));
    }
    const tried = [...failures].map(([ep, why]) => `${ep} (${why})`).join(', ');
    throw new StoreUnavailableError(`etcd did not answer ${what} within ${deadlineMs} ms; tried ${tried || this.endpoints.join(', ')}`);
  }

  /**
   * A bidirectional stream on the preferred member, or on the one after `after` when the caller
   * is moving away from a member whose stream broke. `hasleader` makes etcd end the stream when
   * that member loses its leader, instead of keeping a stream that will never carry an event.
   */
  openStream<Req, Res>(service: 'Watch' | 'Lease', method: string, after?: string): { stream: ClientDuplexStream<Req, Res>; endpoint: string } {
    let index = this.#preferred;
    if (after !== undefined) {
      const at = this.endpoints.indexOf(after);
      if (at >= 0) index = (at + 1) % this.#members.length;
    }
    const member = this.#members[index]!;
    const metadata = new Metadata();
    metadata.set('hasleader', 'true');
    const client = member.clients[service] as unknown as Record<string, (m: Metadata, o?: CallOptions) => ClientDuplexStream<Req, Res>>;
    return { stream: client[method]!.call(member.clients[service], metadata, {}), endpoint: member.endpoint };
  }

  /** Calls on this member failed: prefer the next one from now on. */
  markFailed(endpoint: string): void {
    const at = this.endpoints.indexOf(endpoint);
    if (at === this.#preferred) this.#preferred = (at + 1) % this.#members.length;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const m of this.#members) {
      try {
        m.clients.KV.close();
      } catch { /* closing never fails the caller */ }
    }
  }

  #order(): number[] {
    const n = this.#members.length;
    return Array.from({ length: n }, (_, i) => (this.#preferred + i) % n);
  }
}

function callUnary<Res>(client: Client, method: string, request: object, timeoutMs: number): Promise<Res> {
  return new Promise((resolve, reject) => {
    const fn = (client as unknown as Record<string, (req: object, o: CallOptions, cb: (err: ServiceError | null, res: Res) => void) => void>)[method]!;
    fn.call(client, request, { deadline: new Date(Date.now() + Math.max(1, timeoutMs)) }, (err, res) => (err ? reject(err) : resolve(res)));
  });
}
