// The writes that take a node's certificates away, for every path that does (mcctl node revoke,
// mcctl delete node, the collector deleting an approved node whose host never connected): one
// rule, so no path forgets the generation and leaves older certificates able to come back.

import type { WriteOp } from '../store/store.ts';
import type { NodeGenerationRecord, NodeRecordValue, RevokedCertificateRecord } from '../store/stored-records.ts';
import type { ClusterCache } from './cluster-cache.ts';

/**
 * The bound certificate listed as revoked (what operators read, by serial), and the name's
 * generation raised (what refuses every older certificate, the ones it renewed from included).
 * The generation record is checked by version, so two revocations at once raise it once each,
 * never to the same number.
 */
export function revocationWrites(cache: ClusterCache, name: string, record: NodeRecordValue, revokedBy: string, reason: RevokedCertificateRecord['reason'], now = Date.now()): WriteOp[] {
  const ops: WriteOp[] = [];
  const bound = record.certificate;
  if (bound && !cache.revokedCertificates.has(bound.sha256)) {
    const value: RevokedCertificateRecord = { node: name, serial: bound.serial, notAfter: bound.notAfter, revokedAt: now, revokedBy, reason };
    ops.push({ type: 'put', kind: 'RevokedCertificate', name: bound.sha256, value, expectedVersion: null });
  }
  const current = cache.nodeGenerations.get(name);
  const raised: NodeGenerationRecord = { generation: (current?.value.generation ?? 0) + 1, raisedAt: now, raisedBy: revokedBy, reason };
  ops.push({ type: 'put', kind: 'NodeGeneration', name, value: raised, ...(current ? { createdAt: current.createdAt, expectedVersion: current.resourceVersion } : { expectedVersion: null }) });
  return ops;
}
