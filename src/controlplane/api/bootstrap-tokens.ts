// Bootstrap tokens: what a host's Ignition pointer config carries to fetch its pool's config. A
// token serves exactly one pool: a worker's token (which sits in every worker's pointer config)
// must never fetch master's config, with master's secrets and a master enrollment token.
//
// Two sources, both scoped: the server's token file (`<pool>:<token>` a line, for a first
// install) and tokens stored with `mcctl pki token create --pool P [--ttl]`. Stored tokens look
// like kubeadm's, `<id>.<secret>`: the id is public (listed, deleted by it), the secret is shown
// once and stored only as a SHA-256 hash.

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { InvalidDocumentError, NotFoundError, WORKER_POOL } from '../../machineconfig/index.ts';
import type { ClusterCache } from '../cache/cluster-cache.ts';
import type { BootstrapTokenRecord } from '../store/stored-records.ts';

/** A token from the server's token file. */
export interface StaticBootstrapToken {
  pool: string;
  token: string;
}

export interface BootstrapTokenInfo extends BootstrapTokenRecord {
  id: string;
}

const POOL_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const TOKEN_ID = /^[a-z0-9]{6}$/;
/** The longest --ttl a token may have: a bootstrap token is for one install wave, not for ever. */
export const MAX_BOOTSTRAP_TOKEN_TTL_MS = 365 * 86_400_000;

/**
 * Reads the token file: `<pool>:<token>` a line; `#` comments and blank lines skipped. A bare
 * token (the format before tokens were scoped) serves the worker pool only, and says so.
 */
export function parseBootstrapTokenFile(text: string, file: string): { tokens: StaticBootstrapToken[]; warnings: string[] } {
  const tokens: StaticBootstrapToken[] = [];
  const warnings: string[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const colon = line.indexOf(':');
    if (colon < 0) {
      warnings.push(`${file}:${i + 1}: a token without a pool serves pool ${WORKER_POOL} only; write "${WORKER_POOL}:<token>" (or "<pool>:<token>") to say so`);
      tokens.push({ pool: WORKER_POOL, token: line });
      return;
    }
    const pool = line.slice(0, colon).trim();
    const token = line.slice(colon + 1).trim();
    if (!POOL_NAME.test(pool) || token.length < 16) {
      throw new InvalidDocumentError([{ object: `BootstrapTokenFile/${file}`, field: `line ${i + 1}`, rule: 'bootstrap-token-format', message: 'each line must be "<pool>:<token>": a pool name (DNS subdomain) and a token of at least 16 characters' }]);
    }
    tokens.push({ pool, token });
  });
  return { tokens, warnings };
}

/** The token file's token for `pool` (demo and tests read the file `mcctl pki init` wrote). */
export function staticTokenFor(text: string, pool: string): string {
  const found = parseBootstrapTokenFile(text, 'bootstrap-token').tokens.find((t) => t.pool === pool);
  if (!found) throw new InvalidDocumentError([{ object: 'BootstrapTokenFile/bootstrap-token', field: pool, rule: 'bootstrap-token-missing', message: `no token for pool ${pool}` }]);
  return found.token;
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * The pool a presented bootstrap token serves and a reference to the token, which the enrollment
 * tokens it mints keep: a stored token's id, or `file:<SHA-256>` for one from the token file.
 * Undefined when it serves none (unknown, deleted or expired).
 */
export function validBootstrapToken(presented: string, staticTokens: readonly StaticBootstrapToken[], cache: ClusterCache, now = Date.now()): { pool: string; ref: string } | undefined {
  // Every static token is compared, so the time taken does not say which one nearly matched.
  let pool: string | undefined;
  for (const t of staticTokens) if (sameSecret(t.token, presented)) pool ??= t.pool;
  if (pool) return { pool, ref: `file:${sha256(presented)}` };
  const dot = presented.indexOf('.');
  if (dot < 0) return undefined;
  const id = presented.slice(0, dot);
  const stored = cache.bootstrapTokens.get(id);
  if (!stored || !sameSecret(stored.value.secretHash, sha256(presented))) return undefined;
  if (stored.value.expiresAt !== undefined && stored.value.expiresAt <= now) return undefined;
  return { pool: stored.value.pool, ref: id };
}

/** A new stored token for `pool`: the record to store and the token, shown once. */
export function newBootstrapToken(request: { pool: string; ttlMs?: number; description?: string; createdBy: string }, now = Date.now()): { id: string; token: string; record: BootstrapTokenRecord } {
  const object = `BootstrapToken/<new>`;
  if (!POOL_NAME.test(request.pool)) {
    throw new InvalidDocumentError([{ object, field: 'pool', rule: 'name-format', message: `pool ${JSON.stringify(request.pool)} must be a DNS subdomain (lowercase letters, digits, "-", ".")` }]);
  }
  if (request.ttlMs !== undefined && !(request.ttlMs > 0 && request.ttlMs <= MAX_BOOTSTRAP_TOKEN_TTL_MS)) {
    throw new InvalidDocumentError([{ object, field: 'ttl', rule: 'bootstrap-token-ttl', message: `the lifetime must be more than 0 and at most 365d` }]);
  }
  if (request.description !== undefined && (request.description.length > 256 || /[\p{Cc}]/u.test(request.description))) {
    throw new InvalidDocumentError([{ object, field: 'description', rule: 'bootstrap-token-description', message: 'the description must be at most 256 characters, without control characters' }]);
  }
  // 6 characters of [a-z0-9] as id, 32 bytes of secret: kubeadm's shape, a longer secret.
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  const id = [...randomBytes(6)].map((b) => alphabet[b % alphabet.length]).join('');
  const token = `${id}.${randomBytes(32).toString('base64url')}`;
  const record: BootstrapTokenRecord = {
    pool: request.pool,
    secretHash: sha256(token),
    createdAt: now,
    createdBy: request.createdBy,
    ...(request.ttlMs !== undefined ? { expiresAt: now + request.ttlMs } : {}),
    ...(request.description ? { description: request.description } : {}),
  };
  return { id, token, record };
}

export function checkedTokenId(id: string): string {
  if (!TOKEN_ID.test(id)) throw new NotFoundError('BootstrapToken', id);
  return id;
}
