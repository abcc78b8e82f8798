// IdentityService: pool-scoped bootstrap tokens, node certificate revocation and enrollment
// approval, for operators.

import { X509Certificate } from 'node:crypto';
import { NotFoundError } from '../../machineconfig/index.ts';
import type { BootstrapToken } from '../../runtime/generated/mcplane/v1/BootstrapToken.ts';
import type { EnrollmentRequest } from '../../runtime/generated/mcplane/v1/EnrollmentRequest.ts';
import type { IdentityServiceHandlers } from '../../runtime/generated/mcplane/v1/IdentityService.ts';
import type { Logger } from '../../runtime/logger.ts';
import { checkedTokenId, newBootstrapToken } from './bootstrap-tokens.ts';
import type { ApiReads, IdentityCommands } from './api-access.ts';
import { approveEnrollmentRequest, denyEnrollmentRequest, isLive, type DecisionContext } from './enrollment-requests.ts';
import type { StoredObject } from '../store/store.ts';
import type { BootstrapTokenRecord, EnrollmentRequestRecord } from '../store/stored-records.ts';
import type { Authorizer } from './authorization.ts';
import { listAuditRecords, type AuditTrail } from './audit-trail.ts';
import { InvalidDocumentError } from '../../machineconfig/index.ts';
import { unary } from './status-errors.ts';

function tokenToWire(id: string, t: BootstrapTokenRecord): BootstrapToken {
  return { id, pool: t.pool, createdUnixMs: t.createdAt, expiresUnixMs: t.expiresAt ?? 0, description: t.description ?? '', createdBy: t.createdBy ?? '' };
}

function requestToWire(o: { name: string; value: EnrollmentRequestRecord }): EnrollmentRequest {
  const r = o.value;
  return {
    id: o.name, nodeName: r.nodeName, pool: r.pool, state: r.state, address: r.address, requestedUnixMs: r.requestedAt,
    decidedBy: r.decidedBy ?? '', decidedUnixMs: r.decidedAt ?? 0, reason: r.reason ?? '', labels: r.labels ?? {},
    certificateSerial: r.certificate ? new X509Certificate(r.certificate).serialNumber.toLowerCase() : '', expiresUnixMs: r.expiresAt,
  };
}

export function identityService({ cache, store }: ApiReads, commands: IdentityCommands, audit: AuditTrail, auth: Authorizer, log: Logger): IdentityServiceHandlers {
  // Who may call what is checked before a handler runs (access-rules.ts, guarded-service.ts).
  const handle = <Req, Res>(fn: (req: Req, who: string) => Res | Promise<Res>) => unary<Req, Res>(log, (req, call) => fn(req, auth.identify(call)?.commonName ?? 'local'));
  const decisions = (): DecisionContext => ({ cache, store, signer: commands.certificateSigner, log });
  return {
    CreateBootstrapToken: handle(async (req: { pool: string; ttlMs: number; description: string }, who) => {
      const { id, token, record } = newBootstrapToken({ pool: req.pool, ...(req.ttlMs ? { ttlMs: req.ttlMs } : {}), ...(req.description ? { description: req.description } : {}), createdBy: who });
      const { revision } = await store.commit([{ type: 'put', kind: 'BootstrapToken', name: id, value: record, expectedVersion: null }]);
      await cache.waitForRevision(revision);
      log.info({ id, pool: record.pool, expiresAt: record.expiresAt, createdBy: who }, 'bootstrap token created');
      return { info: tokenToWire(id, record), token };
    }),
    ListBootstrapTokens: handle(() => ({
      tokens: [...cache.bootstrapTokens.values()]
        .sort((a, b) => a.value.pool.localeCompare(b.value.pool) || a.createdAt - b.createdAt)
        .map((t) => tokenToWire(t.name, t.value)),
    })),
    DeleteBootstrapToken: handle(async (req: { id: string }, who) => {
      const stored = cache.bootstrapTokens.get(checkedTokenId(req.id));
      if (!stored) throw new NotFoundError('BootstrapToken', req.id);
      const { revision } = await store.commit([{ type: 'delete', kind: 'BootstrapToken', name: stored.name, expectedVersion: stored.resourceVersion }]);
      await cache.waitForRevision(revision);
      log.info({ id: stored.name, pool: stored.value.pool, deletedBy: who }, 'bootstrap token deleted');
      return {};
    }),
    RevokeNode: handle(async (req: { name: string }, who) => commands.revokeNode(req.name, who)),
    ListEnrollmentRequests: handle(() => {
      const now = Date.now();
      return {
        requests: [...cache.enrollmentRequests.values()]
          .filter((o: StoredObject<EnrollmentRequestRecord>) => isLive(o.value, now))
          .sort((a, b) => a.value.requestedAt - b.value.requestedAt || a.name.localeCompare(b.name))
          .map(requestToWire),
      };
    }),
    // Signed here when this replica holds the CA key; otherwise the approval is stored and the
    // bootstrap endpoint (which holds it) signs when the host polls.
    ApproveEnrollmentRequest: handle(async (req: { name: string }, who) => requestToWire(await approveEnrollmentRequest(decisions(), req.name, who))),
    // Read here, not on the status thread: audit records are not cached, and that thread reads
    // only what its cache is fed.
    ListAuditRecords: handle(async (req: { sinceUnixMs: number; limit: number }) => {
      if (req.limit < 0 || req.sinceUnixMs < 0) {
        throw new InvalidDocumentError([{ object: 'ListAuditRecordsRequest', field: req.limit < 0 ? 'limit' : 'sinceUnixMs', rule: 'non-negative', message: 'limit and sinceUnixMs must be 0 (everything kept) or more' }]);
      }
      // Not cached (audit-trail.ts): from the store, on whichever replica answers.
      const records = await listAuditRecords(store, req.sinceUnixMs, audit.options.retentionMs);
      return { records: (req.limit ? records.slice(-req.limit) : records).map(({ name, value: r }) => ({
        id: name, timeUnixMs: r.at, subject: r.subject, serial: r.serial, role: r.role, pools: r.pools, peer: r.peer,
        method: r.method, objects: r.objects, result: r.result, message: r.message ?? '', replica: r.replica,
      })) };
    }),
    DenyEnrollmentRequest: handle(async (req: { name: string; reason: string }, who) => requestToWire(await denyEnrollmentRequest(decisions(), req.name, req.reason, who))),
  };
}
