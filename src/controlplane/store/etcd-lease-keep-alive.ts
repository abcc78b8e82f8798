// The renewals of one etcd lease: a LeaseKeepAlive stream that asks every third of the TTL, and
// moves to the next member when its stream breaks. It runs on the lease thread
// (etcd-lease-thread-main.ts), whose event loop does nothing else, so a renewal is never queued
// behind the replica's agent streams; EtcdLease, on the main thread, decides what the renewals
// mean.
//
// A renewal counts from the time its request was SENT: etcd counts the TTL from when it received
// the request, which is later, so a holder that measures from the send never believes in a lease
// etcd may already have expired.

import type { ClientDuplexStream } from '@grpc/grpc-js';
import type { Logger } from '../../runtime/logger.ts';
import { cancelStream, describeGrpcError, type EtcdConnection } from './etcd-connection.ts';
import type { LeaseKeepAliveResponse } from './etcd-proto.ts';

export interface KeepAliveEvents {
  /** etcd renewed the lease; `sentAt` is when the answered request was sent (Unix ms). */
  renewed(sentAt: number): void;
  /** etcd says the lease is gone (expired or revoked): no renewal can bring it back. */
  expired(reason: string): void;
}

export class EtcdLeaseKeepAlive {
  #stream: ClientDuplexStream<object, LeaseKeepAliveResponse> | undefined;
  #endpoint: string | undefined;
  /** Send times of the keep-alives not answered yet, oldest first (answers come in order). */
  #sent: number[] = [];
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  private readonly connection: EtcdConnection;
  readonly id: string;
  readonly ttlMs: number;
  private readonly events: KeepAliveEvents;
  private readonly log: Logger;
  /** Asked before each renewal: false leaves the lease to expire (its holder has stalled). */
  private readonly mayRenew: () => boolean;
  constructor(
    connection: EtcdConnection,
    id: string,
    ttlMs: number,
    events: KeepAliveEvents,
    log: Logger,
    mayRenew: () => boolean = () => true,
  ) {
    this.connection = connection;
    this.id = id;
    this.ttlMs = ttlMs;
    this.events = events;
    this.log = log;
    this.mayRenew = mayRenew;
    this.#open();
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#closeStream();
  }

  #open(): void {
    if (this.#stopped) return;
    if (this.connection.closed) return this.stop();
    const { stream, endpoint } = this.connection.openStream<object, LeaseKeepAliveResponse>('Lease', 'LeaseKeepAlive', this.#endpoint);
    this.#stream = stream;
    this.#endpoint = endpoint;
    this.#sent = [];
    stream.on('data', (res: LeaseKeepAliveResponse) => {
      if (stream !== this.#stream) return;
      const sentAt = this.#sent.shift();
      if (Number(res.TTL) <= 0) {
        this.stop();
        this.events.expired(`etcd says lease ${this.id} expired or does not exist`);
        return;
      }
      if (sentAt !== undefined) this.events.renewed(sentAt);
    });
    const broken = (why: string): void => {
      if (stream !== this.#stream || this.#stopped) return;
      this.log.warn({ lease: this.id, endpoint, why }, 'etcd lease keep-alive stream broke; trying the next member');
      this.#closeStream();
      this.connection.markFailed(endpoint);
      // Try again soon: each attempt that fails brings the lease nearer its end.
      clearTimeout(this.#timer);
      this.#timer = setTimeout(() => this.#open(), Math.min(200, this.ttlMs / 10));
    };
    stream.on('error', (err) => broken(describeGrpcError(err)));
    stream.on('end', () => broken('stream ended'));
    this.#renew();
  }

  #renew(): void {
    clearTimeout(this.#timer);
    if (this.#stopped || !this.#stream) return;
    if (this.mayRenew()) {
      this.#sent.push(Date.now());
      this.#stream.write({ ID: this.id });
    }
    this.#timer = setTimeout(() => this.#renew(), this.ttlMs / 3);
  }

  #closeStream(): void {
    const stream = this.#stream;
    this.#stream = undefined;
    if (stream) cancelStream(stream);
  }
}
