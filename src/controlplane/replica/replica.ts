// This process as one replica among several: a lease that proves it is alive, its Replica
// record on that lease (what `mcctl get replicas` lists), and a heartbeat in that record. When
// the lease is lost (the store unreachable for longer than its TTL allows), the replica tells
// its parts to stop acting (leadership, agent streams, health) and keeps trying to get a new one.

import { EventEmitter } from 'node:events';
import type { Logger } from '../../runtime/logger.ts';
import { VERSION } from '../../runtime/version.ts';
import type { ClusterCache } from '../cache/cluster-cache.ts';
import type { Lease, Store } from '../store/store.ts';
import type { ReplicaRecord } from '../store/stored-records.ts';

export interface ReplicaOptions {
  name: string;
  /** The gRPC address agents and operators reach this replica at. */
  address: string;
  leaseTtlMs: number;
  heartbeatMs: number;
  /** How many agent streams this replica holds, for its record. */
  agents: () => number;
}

export interface ReplicaEvents {
  /** A lease is held: the replica may act (again). */
  ready: [Lease];
  /** The lease is gone or cannot be known alive: stop acting now. */
  lost: [string];
}

export class Replica extends EventEmitter<ReplicaEvents> {
  readonly startedAt = Date.now();
  #lease: Lease | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #watchdog: NodeJS.Timeout | undefined;
  #stopped = false;

  private readonly store: Store;
  private readonly cache: ClusterCache;
  readonly options: ReplicaOptions;
  private readonly log: Logger;
  constructor(store: Store, cache: ClusterCache, options: ReplicaOptions, log: Logger) {
    super();
    this.store = store;
    this.cache = cache;
    this.options = options;
    this.log = log;
  }

  get name(): string {
    return this.options.name;
  }

  /** The live lease, or undefined while the replica has none it can trust. */
  get lease(): Lease | undefined {
    return this.#lease?.isAlive() ? this.#lease : undefined;
  }

  /** Gets the first lease (start-up fails if the store cannot give one) and keeps one. */
  async start(): Promise<void> {
    await this.#acquire();
    // The lease's own loss signal may come late (a keep-alive stream that hangs rather than
    // fails), so the replica also checks the lease's age itself.
    this.#watchdog = setInterval(() => {
      if (this.#lease && !this.#lease.isAlive()) this.#lose('the store has not renewed this replica\'s lease in time');
    }, Math.max(50, Math.floor(this.options.leaseTtlMs / 10)));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#watchdog);
    clearTimeout(this.#heartbeat);
    const lease = this.#lease;
    this.#lease = undefined;
    // Revoking deletes the replica's record, its sessions and (if it led) the leader record at
    // once, so the others take over without waiting for the TTL.
    await lease?.revoke().catch((err: unknown) => this.log.warn({ err }, 'revoking the replica lease failed; it expires by itself'));
  }

  async #acquire(): Promise<void> {
    const lease = await this.store.grantLease(this.options.leaseTtlMs);
    lease.onLost((reason) => {
      if (this.#lease === lease) this.#lose(reason);
    });
    this.#lease = lease;
    await this.#writeRecord();
    this.log.info({ replica: this.name, lease: lease.id, ttlMs: lease.ttlMs }, 'replica lease acquired');
    this.emit('ready', lease);
    this.#scheduleHeartbeat();
  }

  #lose(reason: string): void {
    if (!this.#lease || this.#stopped) return;
    this.#lease = undefined;
    clearTimeout(this.#heartbeat);
    this.log.error({ replica: this.name, reason }, 'replica lost its lease: stepping down, closing agent streams, reporting NOT_SERVING');
    this.emit('lost', reason);
    void this.#reacquire();
  }

  async #reacquire(): Promise<void> {
    for (let attempt = 1; !this.#stopped && !this.#lease; attempt++) {
      try {
        await this.#acquire();
        return;
      } catch (err) {
        if (attempt === 1 || attempt % 10 === 0) this.log.warn({ err, attempt }, 'cannot get a new replica lease yet; retrying');
        await new Promise((r) => setTimeout(r, Math.min(2000, 100 * attempt)));
      }
    }
  }

  #scheduleHeartbeat(): void {
    this.#heartbeat = setTimeout(() => {
      void this.#writeRecord()
        .catch((err: unknown) => this.log.warn({ err }, 'replica heartbeat write failed'))
        .finally(() => {
          if (this.#lease && !this.#stopped) this.#scheduleHeartbeat();
        });
    }, this.options.heartbeatMs);
  }

  async #writeRecord(): Promise<void> {
    const lease = this.#lease;
    if (!lease) return;
    const existing = this.cache.replicas.get(this.name);
    const value: ReplicaRecord = {
      address: this.options.address,
      version: VERSION,
      startedAt: this.startedAt,
      heartbeatAt: Date.now(),
      agents: this.options.agents(),
    };
    await this.store.commit([{ type: 'put', kind: 'Replica', name: this.name, value, lease: lease.id, ...(existing ? { createdAt: existing.createdAt } : {}) }]);
  }
}
