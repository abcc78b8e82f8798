// How controllers write: every commit fenced by the leader record (a deposed leader's writes
// fail), split to stay within the store's limits, and visible in the cache before the
// controller goes on, so its next read sees its own writes.

import type { ClusterCache } from '../cache/cluster-cache.ts';
import type { LeaderElection } from './leader-election.ts';
import { splitIntoCommits } from '../store/store-limits.ts';
import type { WriteOp } from '../store/store.ts';

export class LeaderWriter {
  private readonly cache: ClusterCache;
  private readonly election: LeaderElection;
  constructor(cache: ClusterCache, election: LeaderElection) {
    this.cache = cache;
    this.election = election;
  }

  /**
   * One commit, all or nothing. `signal` is the controller run's: once this replica stops leading
   * nothing more is written, even before the fence would refuse it.
   */
  async commit(ops: WriteOp[], signal?: AbortSignal): Promise<void> {
    if (ops.length === 0) return;
    signal?.throwIfAborted();
    const { revision } = await this.cache.store.commit([this.election.fence(), ...ops]);
    await this.cache.waitForRevision(revision);
  }

  /** Independent writes (one object each), in as many commits as the limits need. */
  async commitEach(ops: WriteOp[], signal?: AbortSignal): Promise<void> {
    for (const batch of splitIntoCommits(ops, 100)) await this.commit(batch, signal);
  }
}
