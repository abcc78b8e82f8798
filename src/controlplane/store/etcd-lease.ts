// A lease on etcd, kept alive by a LeaseKeepAlive stream that renews it every third of its TTL.
// The holder (a leader, a replica's session records) must stop acting before etcd could expire
// the lease and delete what is attached to it, and etcd counts the TTL from when it received a
// renewal, which is after we sent it. So lastRenewedAt is the time the answered request was
// SENT, and isAlive() says false from TTL minus a quarter of it after that: a holder that checks
// isAlive before acting never acts on a lease etcd may already have expired (given clocks that
// run at the same rate; no synchronisation is needed).

import { status, type ClientDuplexStream } from '@grpc/grpc-js';
import { StoreUnavailableError } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import { describeGrpcError, type EtcdConnection } from './etcd-connection.ts';
import type { LeaseKeepAliveResponse } from './etcd-proto.ts';
import type { Lease } from './store.ts';

export class EtcdLease implements Lease {
  readonly id: string;
  readonly ttlMs: number;
  /** How long before the TTL runs out the lease stops counting as alive. */
  readonly marginMs: number;
  #lastRenewedAt: number;
  #listeners: ((reason: string) => void)[] = [];
  #lostReason: string | undefined;
  #stream: ClientDuplexStream<object, LeaseKeepAliveResponse> | undefined;
  #endpoint: string | undefined;
  /** Send times of the keep-alives not answered yet, oldest first (answers come in order). */
  #sent: number[] = [];
  #renewTimer: NodeJS.Timeout | undefined;
  #aliveTimer: NodeJS.Timeout | undefined;
  #ended = false;
  #revoked = false;

  constructor(
    private readonly connection: EtcdConnection,
    id: string,
    ttlMs: number,
    grantedAt: number,
    private readonly log: Logger,
    private readonly onEnd: (l: EtcdLease) => void,
  ) {
    this.id = id;
    this.ttlMs = ttlMs;
    this.marginMs = Math.ceil(ttlMs / 4);
    this.#lastRenewedAt = grantedAt;
    this.#openStream();
    this.#scheduleAliveCheck();
  }

  get lastRenewedAt(): number {
    return this.#lastRenewedAt;
  }

  isAlive(now = Date.now()): boolean {
    return !this.#revoked && this.#lostReason === undefined && now - this.#lastRenewedAt < this.ttlMs - this.marginMs;
  }

  onLost(listener: (reason: string) => void): void {
    if (this.#revoked) return;
    if (this.#lostReason !== undefined) {
      const reason = this.#lostReason;
      queueMicrotask(() => listener(reason));
      return;
    }
    this.#listeners.push(listener);
  }

  async revoke(): Promise<void> {
    // Ending it on purpose is not losing it: the listeners are not called (as in the SQLite store).
    this.#revoked = true;
    this.#listeners = [];
    this.#stop();
    try {
      await this.connection.unary('Lease', 'LeaseRevoke', { ID: this.id }, `LeaseRevoke ${this.id}`);
    } catch (err) {
      // Already expired or revoked: what was attached is gone, which is what revoke wants.
      if ((err as { code?: unknown }).code === status.NOT_FOUND) return;
      if (err instanceof StoreUnavailableError) throw err;
      throw new StoreUnavailableError(`etcd LeaseRevoke ${this.id} failed: ${describeGrpcError(err)}`, { cause: err });
    }
  }

  /** Stops the keep-alives without revoking (the store is closing; etcd expires the lease). */
  stop(): void {
    this.#stop();
  }

  #openStream(): void {
    if (this.#ended) return;
    if (this.connection.closed) return this.#stop();
    const { stream, endpoint } = this.connection.openStream<object, LeaseKeepAliveResponse>('Lease', 'LeaseKeepAlive', this.#endpoint);
    this.#stream = stream;
    this.#endpoint = endpoint;
    this.#sent = [];
    stream.on('data', (res: LeaseKeepAliveResponse) => {
      if (stream !== this.#stream) return;
      const sentAt = this.#sent.shift();
      if (Number(res.TTL) <= 0) {
        this.#lost(`etcd says lease ${this.id} expired or does not exist`);
        this.#stop();
        return;
      }
      if (sentAt !== undefined && sentAt > this.#lastRenewedAt) {
        this.#lastRenewedAt = sentAt;
        this.#scheduleAliveCheck();
      }
    });
    const broken = (why: string) => {
      if (stream !== this.#stream || this.#ended) return;
      this.log.warn({ lease: this.id, endpoint, why }, 'etcd lease keep-alive stream broke; trying the next member');
      this.#closeStream();
      this.connection.markFailed(endpoint);
      // Try again soon: each attempt that fails brings the lease nearer its end.
      clearTimeout(this.#renewTimer);
      this.#renewTimer = setTimeout(() => this.#openStream(), Math.min(200, this.ttlMs / 10));
    };
    stream.on('error', (err) => broken(describeGrpcError(err)));
    stream.on('end', () => broken('stream ended'));
    this.#renew();
  }

  #renew(): void {
    clearTimeout(this.#renewTimer);
    if (this.#ended || !this.#stream) return;
    this.#sent.push(Date.now());
    this.#stream.write({ ID: this.id });
    this.#renewTimer = setTimeout(() => this.#renew(), this.ttlMs / 3);
  }

  /** Fires onLost at the moment isAlive() turns false, unless a renewal comes first. */
  #scheduleAliveCheck(): void {
    clearTimeout(this.#aliveTimer);
    if (this.#ended) return;
    const at = this.#lastRenewedAt + this.ttlMs - this.marginMs;
    this.#aliveTimer = setTimeout(() => {
      if (this.#ended || this.isAlive()) return this.#scheduleAliveCheck();
      this.#lost(`lease ${this.id} not renewed for ${Date.now() - this.#lastRenewedAt} ms (TTL ${this.ttlMs} ms)`);
      this.#stop();
      // The holder has stopped: give up the lease now rather than let what is attached to it
      // linger until etcd expires it (best effort: etcd may be unreachable, which is likely why).
      this.connection.unary('Lease', 'LeaseRevoke', { ID: this.id }, `LeaseRevoke ${this.id}`, this.marginMs).catch(() => {});
    }, Math.max(0, at - Date.now()) + 1);
  }

  #lost(reason: string): void {
    if (this.#lostReason !== undefined || this.#revoked) return;
    this.#lostReason = reason;
    this.log.warn({ lease: this.id, reason }, 'etcd lease lost');
    const listeners = this.#listeners;
    this.#listeners = [];
    for (const listener of listeners) {
      try {
        listener(reason);
      } catch (err) {
        this.log.error({ err, lease: this.id }, 'a lease onLost listener threw');
      }
    }
  }

  #stop(): void {
    if (this.#ended) return;
    this.#ended = true;
    clearTimeout(this.#renewTimer);
    clearTimeout(this.#aliveTimer);
    this.#closeStream();
    this.onEnd(this);
  }

  #closeStream(): void {
    const stream = this.#stream;
    this.#stream = undefined;
    if (!stream) return;
    stream.removeAllListeners('data');
    stream.on('error', () => { /* cancelled on purpose */ });
    try {
      stream.cancel();
    } catch { /* already closed */ }
  }
}
