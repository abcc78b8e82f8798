// Deletes enrollment tokens once they expire (used or not), so the store does not keep every
// token ever issued, and enrollment requests once they expire (pending ones nobody decided on,
// decided ones a day after the decision). Leader-only, and time-driven: it asks to run again
// after each sweep.

import { ConflictError } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { ClusterCache } from '../cache/cluster-cache.ts';
import type { Controller, ReconcileResult } from './controller.ts';
import type { LeaderWriter } from '../replica/leader-writer.ts';
import type { WriteOp } from '../store/store.ts';
import type { EnrollmentTokenRecord } from '../store/stored-records.ts';

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

  async reconcile(signal?: AbortSignal, now = Date.now()): Promise<ReconcileResult> {
    // Tokens are not cached (only the endpoint that checks one reads it), so the sweep lists them.
    const { items } = await this.cache.store.list(['EnrollmentToken']);
    const expired: WriteOp[] = items
      .filter((o) => (o.value as EnrollmentTokenRecord).expiresAt <= now)
      .map((o) => ({ type: 'delete', kind: 'EnrollmentToken', name: o.name, expectedVersion: o.resourceVersion }));
    if (expired.length) {
      await this.writer.commitEach(expired, signal);
      this.log.info({ deleted: expired.length, kept: items.length - expired.length }, 'deleted expired enrollment tokens');
    }
    // Requests are cached. Each delete is fenced by the version read: a request decided at the
    // moment it expired keeps its decision (and its new expiry) and goes at a later sweep.
    const requests = [...this.cache.enrollmentRequests.values()].filter((o) => o.value.expiresAt <= now);
    for (const o of requests) {
      await this.writer.commit([{ type: 'delete', kind: 'EnrollmentRequest', name: o.name, expectedVersion: o.resourceVersion }]).catch((err: unknown) => {
        if (!(err instanceof ConflictError && err.kind === 'EnrollmentRequest')) throw err;
        this.log.debug({ id: o.name }, 'an expired enrollment request changed while being deleted; the next sweep looks again');
      });
    }
    if (requests.length) {
      const pending = requests.filter((o) => o.value.state === 'Pending');
      this.log.info({ deleted: requests.length, undecided: pending.length, nodes: pending.slice(0, 10).map((o) => o.value.nodeName) }, 'deleted expired enrollment requests');
    }
    return { requeueAfterMs: this.sweepMs };
  }
}
