// A lease on etcd as its holder (a leader, a replica's session records) sees it. The renewals run
// on the lease thread (etcd-lease-thread.ts), which shares the time of the latest one. The
// holder must stop acting before etcd could expire the lease and delete what is attached to it,
// and etcd counts the TTL from when it received a renewal, which is after we sent it. So
// lastRenewedAt is the time the answered request was SENT, and isAlive() says false from TTL
// minus a quarter of it after that: a holder that checks isAlive before acting never acts on a
// lease etcd may already have expired (given clocks that run at the same rate; no
// synchronisation is needed).

import { status } from '@grpc/grpc-js';
import { StoreUnavailableError } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import { describeGrpcError, type EtcdConnection } from './etcd-connection.ts';
import type { EtcdLeaseThread, KeptLease } from './etcd-lease-thread.ts';
import type { Lease } from './store.ts';

export class EtcdLease implements Lease {
  readonly id: string;
  readonly ttlMs: number;
  /** How long before the TTL runs out the lease stops counting as alive. */
  readonly marginMs: number;
  readonly #grantedAt: number;
  readonly #kept: KeptLease;
  #listeners: ((reason: string) => void)[] = [];
  #lostReason: string | undefined;
  #aliveTimer: NodeJS.Timeout | undefined;
  #ended = false;
  #revoked = false;

  private readonly connection: EtcdConnection;
  private readonly log: Logger;
  private readonly onEnd: (l: EtcdLease) => void;
  constructor(
    connection: EtcdConnection,
    thread: EtcdLeaseThread,
    id: string,
    ttlMs: number,
    grantedAt: number,
    log: Logger,
    onEnd: (l: EtcdLease) => void,
  ) {
    this.connection = connection;
    this.log = log;
    this.onEnd = onEnd;
    this.id = id;
    this.ttlMs = ttlMs;
    this.marginMs = Math.ceil(ttlMs / 4);
    this.#grantedAt = grantedAt;
    this.#kept = thread.keep(id, ttlMs, grantedAt, (reason) => {
      this.#lost(reason);
      this.#stop();
    });
    this.#scheduleAliveCheck();
  }

  get lastRenewedAt(): number {
    return Math.max(this.#grantedAt, this.#kept.lastRenewedAt());
  }

  isAlive(now = Date.now()): boolean {
    return !this.#revoked && this.#lostReason === undefined && now - this.lastRenewedAt < this.ttlMs - this.marginMs;
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

  /** Fires onLost at the moment isAlive() turns false, unless a renewal comes first. */
  #scheduleAliveCheck(): void {
    clearTimeout(this.#aliveTimer);
    if (this.#ended) return;
    const at = this.lastRenewedAt + this.ttlMs - this.marginMs;
    this.#aliveTimer = setTimeout(() => {
      if (this.#ended || this.isAlive()) return this.#scheduleAliveCheck();
      this.#lost(`lease ${this.id} not renewed for ${Date.now() - this.lastRenewedAt} ms (TTL ${this.ttlMs} ms)`);
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
    clearTimeout(this.#aliveTimer);
    this.#kept.stop();
    this.onEnd(this);
  }
}
