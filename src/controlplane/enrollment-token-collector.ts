// Deletes enrollment tokens once they expire (used or not), so the store does not keep every
// token ever issued. Leader-only, and time-driven: it asks to run again after each sweep.

import type { Logger } from '../runtime/logger.ts';
import type { ClusterCache } from './cluster-cache.ts';
import type { Controller, ReconcileResult } from './controller.ts';
import type { LeaderWriter } from './leader-writer.ts';
import type { WriteOp } from './store/store.ts';
import type { EnrollmentTokenRecord } from './stored-records.ts';

export class EnrollmentTokenCollector implements Controller {
  readonly name = 'enrollment-token-gc';
  readonly leaderOnly = true;

  constructor(
    private readonly cache: ClusterCache,
    private readonly writer: LeaderWriter,
    private readonly sweepMs: number,
    private readonly log: Logger,
  ) {}

  interestedIn(): boolean {
    return false;
  }

  async reconcile(now = Date.now()): Promise<ReconcileResult> {
    // Tokens are not cached (only the endpoint that checks one reads it), so the sweep lists them.
    const { items } = await this.cache.store.list(['EnrollmentToken']);
    const expired: WriteOp[] = items
      .filter((o) => (o.value as EnrollmentTokenRecord).expiresAt <= now)
      .map((o) => ({ type: 'delete', kind: 'EnrollmentToken', name: o.name, expectedVersion: o.resourceVersion }));
    if (expired.length) {
      await this.writer.commitEach(expired);
      this.log.info({ deleted: expired.length, kept: items.length - expired.length }, 'deleted expired enrollment tokens');
    }
    return { requeueAfterMs: this.sweepMs };
  }
}
