// Leader election on the replica's lease, as Kubernetes' leader election uses a Lease object:
// the one Leader record is created only if absent (a compare on its create revision) and lives
// on the leader's lease, so it disappears when the leader dies or is cut off, and every
// replica's watch sees that and campaigns. The consensus is the store's (etcd's Raft); this is
// only the protocol on top.
//
// Leader-only writes carry a check that the Leader record is still the one this replica
// created (fence()), so a deposed leader that has not noticed yet cannot write.

import { EventEmitter } from 'node:events';
import { ConflictError, NotLeaderError } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { ClusterCache } from '../cache/cluster-cache.ts';
import type { Replica } from './replica.ts';
import type { CheckOp } from '../store/store.ts';
import { LEADER_KEY, type LeaderRecord } from '../store/stored-records.ts';

export class LeaderElection extends EventEmitter<{ leading: [boolean] }> {
  /** The Leader record's version while this replica holds it. */
  #held: string | undefined;
  #campaigning = false;
  #tick: NodeJS.Timeout | undefined;
  #stopped = false;

  private readonly cache: ClusterCache;
  private readonly replica: Replica;
  private readonly log: Logger;
  constructor(cache: ClusterCache, replica: Replica, log: Logger) {
    super();
    this.cache = cache;
    this.replica = replica;
    this.log = log;
    cache.on('change', (change) => {
      if (change.resync || change.changed.has('Leader')) this.#check();
    });
    replica.on('lost', () => this.#stepDown('the replica lost its lease'));
    replica.on('ready', () => this.#check());
  }

  get leading(): boolean {
    return this.#held !== undefined && this.replica.lease !== undefined && this.cache.leader?.resourceVersion === this.#held;
  }

  /** The check a leader-only commit carries; throws when this replica does not lead. */
  fence(): CheckOp {
    if (!this.leading) throw new NotLeaderError(`replica ${this.replica.name} is not the leader`);
    return { type: 'check', kind: 'Leader', name: LEADER_KEY, expectedVersion: this.#held! };
  }

  start(): void {
    // Besides the watch, a periodic check: a lease that silently ages out must stop the leader
    // before the store deletes its record (Replica checks that too; this is the leader's own).
    this.#tick = setInterval(() => this.#check(), 250);
    this.#check();
  }

  /** Gives leadership up at once (shutdown), so another replica need not wait for the TTL. */
  async resign(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#tick);
    const held = this.#held;
    this.#stepDown('shutting down');
    if (held) {
      await this.cache.store.commit([{ type: 'delete', kind: 'Leader', name: LEADER_KEY, expectedVersion: held }])
        .catch(() => { /* gone already, or the lease revocation removes it */ });
    }
  }

  #check(): void {
    if (this.#stopped) return;
    if (this.#held !== undefined && !this.leading) {
      this.#stepDown(this.replica.lease ? 'another replica holds the leader record' : 'the replica lease is not known to be alive');
    }
    if (!this.cache.leader && this.replica.lease && !this.#campaigning) void this.#campaign();
  }

  async #campaign(): Promise<void> {
    const lease = this.replica.lease;
    if (!lease) return;
    this.#campaigning = true;
    try {
      const value: LeaderRecord = { replica: this.replica.name, since: Date.now() };
      const { objects, revision } = await this.cache.store.commit([
        { type: 'put', kind: 'Leader', name: LEADER_KEY, value, expectedVersion: null, lease: lease.id },
      ]);
      await this.cache.waitForRevision(revision);
      this.#held = objects[0]!.resourceVersion;
      if (this.leading) {
        this.log.info({ replica: this.replica.name, epoch: this.#held }, 'elected leader');
        this.emit('leading', true);
      }
    } catch (err) {
      if (!(err instanceof ConflictError)) this.log.warn({ err }, 'leader campaign failed; retrying');
    } finally {
      this.#campaigning = false;
    }
  }

  #stepDown(reason: string): void {
    if (this.#held === undefined) return;
    this.#held = undefined;
    this.log.warn({ replica: this.replica.name, reason }, 'no longer the leader');
    this.emit('leading', false);
  }
}
