// Deletes enrollment tokens once they expire (used or not), or once the bootstrap token that paid
// for them is deleted or expired, so the store does not keep every token ever issued; and
// enrollment requests once they expire (pending ones nobody decided on or their host stopped
// polling, decided ones a day after the decision), each approved one with its node when the host
// never connected. Leader-only, and time-driven: it asks to run again after each sweep.

import { ConflictError } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import type { ClusterCache } from '../cache/cluster-cache.ts';
import { awaitingFirstConnection, bootstrapTokenLive } from '../cache/enrollment-liveness.ts';
import { revocationWrites } from '../cache/node-revocation.ts';
import type { Controller, ReconcileResult } from './controller.ts';
import type { LeaderWriter } from '../replica/leader-writer.ts';
import { DELETED_WITH_NODE } from '../store/kinds.ts';
import type { StoredObject, WriteOp } from '../store/store.ts';
import type { EnrollmentRequestRecord, EnrollmentTokenRecord } from '../store/stored-records.ts';

export class EnrollmentTokenCollector implements Controller {
  readonly name = 'enrollment-token-gc';
  readonly leaderOnly = true;

  private readonly cache: ClusterCache;
  private readonly writer: LeaderWriter;
  private readonly sweepMs: number;
  private readonly log: Logger;
  constructor(
    cache: ClusterCache,
    writer: LeaderWriter,
    sweepMs: number,
    log: Logger,
  ) {
    this.cache = cache;
    this.writer = writer;
    this.sweepMs = sweepMs;
    this.log = log;
  }

  interestedIn(): boolean {
    return false;
  }

  async reconcile(signal?: AbortSignal, now = Date.now()): Promise<ReconcileResult> {
    // Tokens are not cached (only the endpoint that checks one reads it), so the sweep lists them.
    // The token file is not known here (it is the endpoint's): its tokens' children live out their TTL.
    const { items } = await this.cache.store.list(['EnrollmentToken']);
    const dead = (t: EnrollmentTokenRecord): boolean => t.expiresAt <= now || (t.mintedBy !== undefined && !bootstrapTokenLive(t.mintedBy, undefined, this.cache, now));
    const expired: WriteOp[] = items
      .filter((o) => dead(o.value as EnrollmentTokenRecord))
      .map((o) => ({ type: 'delete', kind: 'EnrollmentToken', name: o.name, expectedVersion: o.resourceVersion }));
    if (expired.length) {
      await this.writer.commitEach(expired, signal);
      this.log.info({ deleted: expired.length, kept: items.length - expired.length }, 'deleted expired enrollment tokens (or those whose bootstrap token is gone)');
    }
    // Requests are cached. Each delete is fenced by the version read: a request decided at the
    // moment it expired keeps its decision (and its new expiry) and goes at a later sweep.
    const requests = [...this.cache.enrollmentRequests.values()].filter((o) => o.value.expiresAt <= now);
    const phantoms: string[] = [];
    for (const o of requests) {
      const ops = this.#withNeverConnectedNode(o, phantoms);
      await this.writer.commit([{ type: 'delete', kind: 'EnrollmentRequest', name: o.name, expectedVersion: o.resourceVersion }, ...ops]).catch((err: unknown) => {
        if (!(err instanceof ConflictError && (err.kind === 'EnrollmentRequest' || err.kind === 'Node'))) throw err;
        if (ops.length) phantoms.pop();
        this.log.debug({ id: o.name }, 'an expired enrollment request (or its node) changed while being deleted; the next sweep looks again');
      });
    }
    if (requests.length) {
      const pending = requests.filter((o) => o.value.state === 'Pending');
      this.log.info({ deleted: requests.length, undecided: pending.length, nodes: pending.slice(0, 10).map((o) => o.value.nodeName) }, 'deleted expired enrollment requests');
    }
    if (phantoms.length) {
      this.log.warn({ nodes: phantoms.slice(0, 20), count: phantoms.length }, 'deleted the nodes of expired approved enrollment requests whose hosts never connected; their certificates are revoked');
    }
    return { requeueAfterMs: this.sweepMs };
  }

  /**
   * The writes that delete an approved request's node when its host never connected: the record
   * the approval made, unchanged since (fenced by its version), and its certificate revoked, as
   * `mcctl delete node` does, so a host that turns up later asks again rather than comes back.
   */
  #withNeverConnectedNode(o: StoredObject<EnrollmentRequestRecord>, phantoms: string[]): WriteOp[] {
    if (!awaitingFirstConnection(this.cache, o.value)) return [];
    const name = o.value.nodeName;
    const record = this.cache.nodeRecords.get(name)!;
    const revoke = revocationWrites(this.cache, name, record.value, `enrollment request ${o.name.slice(0, 16)} expired; the node never connected`, 'deleted');
    phantoms.push(name);
    return [
      { type: 'check', kind: 'Node', name, expectedVersion: record.resourceVersion },
      ...revoke,
      ...DELETED_WITH_NODE.map((k) => ({ type: 'delete' as const, kind: k, name })),
    ];
  }
}
