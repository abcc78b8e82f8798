// What keeps enrollment's objects alive, read from the cache by the bootstrap endpoint (at use)
// and the leader's collector (at each sweep): an enrollment token lives no longer than the
// bootstrap token it was minted with, and an approved node that never connected lives no longer
// than its request.

import { createHash, timingSafeEqual } from 'node:crypto';
import type { EnrollmentRequestRecord } from '../store/stored-records.ts';
import type { ClusterCache } from './cluster-cache.ts';

/**
 * Whether the bootstrap token `ref` names (an enrollment token's mintedBy: a stored token's id,
 * or `file:<SHA-256>`) still serves: deleting a leaked bootstrap token, or its expiry, ends the
 * enrollments it paid for. `fileTokens` undefined: a replica that does not know the token file
 * (the leader's collector) leaves the file tokens' children to their own expiry.
 */
export function bootstrapTokenLive(ref: string, fileTokens: readonly { token: string }[] | undefined, cache: ClusterCache, now = Date.now()): boolean {
  if (ref.startsWith('file:')) {
    if (!fileTokens) return true;
    const hash = Buffer.from(ref.slice('file:'.length));
    return fileTokens.some((t) => {
      const candidate = Buffer.from(createHash('sha256').update(t.token).digest('hex'));
      return candidate.length === hash.length && timingSafeEqual(candidate, hash);
    });
  }
  const stored = cache.bootstrapTokens.get(ref);
  return stored !== undefined && (stored.value.expiresAt === undefined || stored.value.expiresAt > now);
}

/**
 * Whether an approved request's node has yet to connect: its record is still the one the approval
 * made (never registered). Such a node is no machine of its pool yet, holds a place in the
 * endpoint's queue, and goes with the request when the request expires.
 */
export function awaitingFirstConnection(cache: ClusterCache, r: EnrollmentRequestRecord): boolean {
  if (r.state !== 'Approved') return false;
  const node = cache.nodeRecords.get(r.nodeName)?.value;
  return node !== undefined && node.registered === false && node.enrolledFor === r.pool;
}
