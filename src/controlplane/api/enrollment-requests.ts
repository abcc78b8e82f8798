// Enrollment approval (issue 17), as Flight Control does it: a host with no bootstrap token asks
// to join (POST /enrollment-requests on the bootstrap endpoint, with a CSR for its own key) and
// waits; an operator approves or denies (mcctl approve/deny enrollment), or a server rule approves
// a pool's hosts whose names match a pattern. Approval signs the CSR as O=mcplane:nodes,OU=<pool>,
// CN=<name> and creates the Node record bound to that certificate in the same commit, as /enroll
// does. No config travels over the unauthenticated channel: the host connects with its
// certificate and its agent gets its pool's config over the stream, like every agent.

import { ConfigurationError, labelsForPool, NotFoundError, PreconditionFailedError, ConflictError } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import { certificateBinding, signNodeCertificate, type KeyPairPem } from '../../runtime/pki.ts';
import type { ClusterCache } from '../cache/cluster-cache.ts';
import { awaitingFirstConnection } from '../cache/enrollment-liveness.ts';
import type { Store, StoredObject, WriteOp } from '../store/store.ts';
import type { EnrollmentRequestRecord, NodeRecordValue } from '../store/stored-records.ts';

/** How long a request waits for a decision before the collector deletes it. */
export const ENROLLMENT_REQUEST_TTL_MS = 24 * 3600_000;
/** How long a decided request is kept: the host reads its answer, the operator sees what was decided. */
export const DECIDED_ENROLLMENT_REQUEST_TTL_MS = 24 * 3600_000;
/** Requests waiting at once: an unauthenticated endpoint must not let anyone fill the store. */
export const MAX_PENDING_ENROLLMENT_REQUESTS = 1000;
/**
 * How long a pending request lives without its host polling it, and how long an auto-approved
 * host has to connect. A host that waits polls every few seconds (agent.yaml's pollSeconds, at
 * most 300) and keeps its request; what an anonymous flood leaves behind dies out by itself.
 */
export const ENROLLMENT_REQUEST_IDLE_TTL_MS = 15 * 60_000;
/** The longest Retry-After a full queue answers: it frees up as requests expire or are decided. */
export const MAX_FULL_QUEUE_RETRY_AFTER_S = 60;
/**
 * What one request may hold, so 1,000 of them are a few MB, not the 63 MB a flood of 64 KiB
 * bodies made: the body, the CSR (a P-256 request is about 500 characters, RSA-4096 1,700) and
 * the labels the host reports (their keys and values together).
 */
export const MAX_ENROLLMENT_BODY_BYTES = 16 * 1024;
export const MAX_CSR_CHARS = 4096;
export const MAX_REQUEST_LABELS = 64;
export const MAX_REQUEST_LABEL_CHARS = 2048;

const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const GLOB = /^[-a-z0-9.*?]{1,253}$/;
/** The shortest id prefix an operator may type instead of the whole id. */
const MIN_ID_PREFIX = 8;

/** Requests for `pool` from hosts whose name matches `nodeNamePattern` are approved at once. */
export interface AutoApproveRule {
  pool: string;
  /** A glob: `*` any run of characters, `?` one. */
  nodeNamePattern: string;
}

export function describeRule(rule: AutoApproveRule): string {
  return `${rule.pool}=${rule.nodeNamePattern}`;
}

/**
 * Rules from --enrollment-auto-approve POOL=GLOB (repeatable) or the config file's
 * `enrollmentAutoApprove: [{pool, nodeNamePattern}]` (the POOL=GLOB strings are taken there too).
 * A rule names its pool outright, never by pattern: no rule reaches master unless it says master.
 */
export function parseAutoApproveRules(values: unknown, setting = '--enrollment-auto-approve'): AutoApproveRule[] {
  if (values === undefined || values === null) return [];
  if (!Array.isArray(values)) throw new ConfigurationError(`${setting}: expected a list of POOL=GLOB rules (or {pool, nodeNamePattern} objects in the config file)`);
  return values.map((v: unknown) => {
    let rule: { pool?: unknown; nodeNamePattern?: unknown };
    if (typeof v === 'string') {
      const eq = v.indexOf('=');
      rule = eq < 0 ? {} : { pool: v.slice(0, eq).trim(), nodeNamePattern: v.slice(eq + 1).trim() };
    } else {
      rule = (v ?? {}) as typeof rule;
    }
    const shown = typeof v === 'string' ? v : JSON.stringify(v);
    if (typeof rule.pool !== 'string' || !NAME.test(rule.pool)) {
      throw new ConfigurationError(`${setting} ${shown}: expected POOL=GLOB with POOL a pool's name (a DNS subdomain, no pattern: a rule names the one pool it approves for)`);
    }
    if (typeof rule.nodeNamePattern !== 'string' || !GLOB.test(rule.nodeNamePattern)) {
      throw new ConfigurationError(`${setting} ${shown}: the node name pattern must be a glob of lowercase letters, digits, "-", ".", "*" and "?"`);
    }
    return { pool: rule.pool, nodeNamePattern: rule.nodeNamePattern };
  });
}

/**
 * Whether `name` matches `glob` (`*` any run of characters, `?` one). Two pointers and the last
 * star to fall back to: at most len(glob) x len(name) steps, never more. A RegExp of `.*`s
 * backtracks exponentially in the stars, and the name comes from an anonymous request: five
 * stars and 252 characters held the event loop 82 s.
 */
export function globMatches(glob: string, name: string): boolean {
  let g = 0;
  let n = 0;
  let star = -1;
  let resume = 0;
  while (n < name.length) {
    if (g < glob.length && (glob[g] === '?' || glob[g] === name[n])) {
      g++;
      n++;
    } else if (g < glob.length && glob[g] === '*') {
      star = g++;
      resume = n;
    } else if (star >= 0) {
      // The last star takes one more character; what follows it is matched again from there.
      g = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (g < glob.length && glob[g] === '*') g++;
  return g === glob.length;
}

/** The first rule that approves `nodeName` joining `pool`, if any. */
export function autoApproveRuleFor(rules: readonly AutoApproveRule[], pool: string, nodeName: string): AutoApproveRule | undefined {
  return rules.find((r) => r.pool === pool && globMatches(r.nodeNamePattern, nodeName));
}

/** Signs node certificates: the replicas that hold the CA key (those serving the bootstrap endpoint). */
export interface CertificateSigner {
  /** The CA certificate (PEM), for the host to verify the server with. */
  readonly caPem: string;
  /**
   * A client certificate for the request's key: O=mcplane:nodes, OU=<pool>, CN=<nodeName>, at the
   * node name's current certificate generation (ClusterCache.nodeGeneration).
   */
  signNode(csrPem: string, nodeName: string, pool: string, generation: number): Promise<string>;
}

export function caSigner(ca: KeyPairPem): CertificateSigner {
  return {
    caPem: ca.certPem,
    // The certificate binds the node to the pool it asked for (OU): it joins that role and cannot
    // claim another, whatever its agent.yaml says.
    signNode: (csrPem, nodeName, pool, generation) => signNodeCertificate(ca, csrPem, nodeName, pool, generation),
  };
}

/** The Node record an approval creates: the pool's role labels, bound to the certificate when there is one. */
export function enrolledNodeRecord(cache: ClusterCache, pool: string, certificate: string | undefined): NodeRecordValue {
  return {
    labels: labelsForPool(cache.pools.get(pool)?.value, pool),
    enrolledFor: pool,
    registered: false,
    ...(certificate ? { certificate: certificateBinding(certificate) } : {}),
  };
}

export function isLive(r: EnrollmentRequestRecord, now = Date.now()): boolean {
  return r.expiresAt > now;
}

/** How an auto-approval is recorded as decided: `auto-approve rule <pool>=<glob>`. */
export const AUTO_APPROVED_BY = 'auto-approve rule ';

/**
 * The requests that hold a place in the queue: pending ones, and those a rule approved whose host
 * has not connected (an auto-approval for a host that never comes must not be free; an operator's
 * approval is the operator's to make); and when the first of them expires, for a Retry-After that
 * says when a place frees up.
 */
export function queuedRequests(cache: ClusterCache, now = Date.now()): { count: number; firstExpiry: number } {
  let count = 0;
  let firstExpiry = Infinity;
  for (const o of cache.enrollmentRequests.values()) {
    const autoApproved = o.value.decidedBy?.startsWith(AUTO_APPROVED_BY) === true && awaitingFirstConnection(cache, o.value);
    if (!isLive(o.value, now) || !(o.value.state === 'Pending' || autoApproved)) continue;
    count++;
    firstExpiry = Math.min(firstExpiry, o.value.expiresAt);
  }
  return { count, firstExpiry };
}

/**
 * The request an operator named: its id, an id prefix of at least 8 characters, or the node name
 * of one pending request (what operators type; the id tells two hosts asking for one name apart).
 */
export function findEnrollmentRequest(cache: ClusterCache, name: string, now = Date.now()): StoredObject<EnrollmentRequestRecord> {
  const all = [...cache.enrollmentRequests.values()].filter((o) => isLive(o.value, now));
  const exact = cache.enrollmentRequests.get(name);
  if (exact && isLive(exact.value, now)) return exact;
  const byPrefix = name.length >= MIN_ID_PREFIX && /^[0-9a-f]+$/.test(name) ? all.filter((o) => o.name.startsWith(name)) : [];
  const byNode = all.filter((o) => o.value.nodeName === name);
  // A name with one pending request means that one, even when decided ones of the name remain.
  const pending = byNode.filter((o) => o.value.state === 'Pending');
  const candidates = byPrefix.length ? byPrefix : pending.length ? pending : byNode;
  if (candidates.length === 1) return candidates[0]!;
  if (candidates.length === 0) throw new NotFoundError('EnrollmentRequest', name);
  throw new PreconditionFailedError(`"${name}" names ${candidates.length} enrollment requests (${candidates.map((o) => `${o.name.slice(0, 16)} from ${o.value.address}`).join(', ')}); give the ID instead (mcctl get enrollments -o wide)`);
}

export interface DecisionContext {
  cache: ClusterCache;
  store: Store;
  /** Absent on a replica without the CA key: the approval is stored, the bootstrap endpoint signs. */
  signer: CertificateSigner | undefined;
  log: Logger;
}

function undecided(stored: StoredObject<EnrollmentRequestRecord>): void {
  const r = stored.value;
  if (r.state !== 'Pending') {
    throw new PreconditionFailedError(`EnrollmentRequest/${stored.name} (node ${r.nodeName}) was already ${r.state.toLowerCase()} by ${r.decidedBy ?? 'someone'}${r.reason ? ` (${r.reason})` : ''}; a decision is final until the request expires`);
  }
}

const nameTaken = (nodeName: string): PreconditionFailedError =>
  new PreconditionFailedError(`Node/${nodeName} is already registered; approving would give a second host its identity (delete the node first: mcctl delete node ${nodeName}, or deny this request)`);

/**
 * Approves a pending request: signs its CSR when this replica can, and in one commit records the
 * decision and creates the Node record bound to the certificate. Refused when the name is taken.
 */
export async function approveEnrollmentRequest(ctx: DecisionContext, name: string, decidedBy: string, now = Date.now()): Promise<StoredObject<EnrollmentRequestRecord>> {
  const stored = findEnrollmentRequest(ctx.cache, name, now);
  undecided(stored);
  const r = stored.value;
  if (!ctx.cache.pools.has(r.pool)) throw new PreconditionFailedError(`EnrollmentRequest/${stored.name} asks to join MachineConfigPool/${r.pool}, which does not exist; create the pool or deny the request`);
  if (ctx.cache.nodeRecords.has(r.nodeName)) throw nameTaken(r.nodeName);
  const certificate = ctx.signer ? await ctx.signer.signNode(r.csr, r.nodeName, r.pool, ctx.cache.nodeGeneration(r.nodeName)) : undefined;
  const value: EnrollmentRequestRecord = { ...r, state: 'Approved', decidedBy, decidedAt: now, expiresAt: now + DECIDED_ENROLLMENT_REQUEST_TTL_MS, ...(certificate ? { certificate } : {}) };
  const ops: WriteOp[] = [
    { type: 'put', kind: 'EnrollmentRequest', name: stored.name, value, expectedVersion: stored.resourceVersion, createdAt: stored.createdAt },
    // Without a certificate yet, the name is reserved for this host now; the endpoint binds the
    // certificate when it signs (an approval never leaves the name to whoever registers first
    // with another certificate: only the CA's holder can make one).
    { type: 'put', kind: 'Node', name: r.nodeName, value: enrolledNodeRecord(ctx.cache, r.pool, certificate), expectedVersion: null },
  ];
  const revision = await commitDecision(ctx, stored, ops, r.nodeName);
  await ctx.cache.waitForRevision(revision);
  ctx.log.info({ id: stored.name, node: r.nodeName, pool: r.pool, address: r.address, decidedBy, signed: certificate !== undefined }, 'enrollment request approved');
  return { ...stored, value };
}

export async function denyEnrollmentRequest(ctx: DecisionContext, name: string, reason: string, decidedBy: string, now = Date.now()): Promise<StoredObject<EnrollmentRequestRecord>> {
  if (reason.length > 512 || /[\p{Cc}]/u.test(reason)) throw new PreconditionFailedError('the reason must be at most 512 characters, without control characters');
  const stored = findEnrollmentRequest(ctx.cache, name, now);
  undecided(stored);
  const { certificate: _none, ...r } = stored.value;
  const value: EnrollmentRequestRecord = { ...r, state: 'Denied', decidedBy, decidedAt: now, reason: reason || 'denied by an operator', expiresAt: now + DECIDED_ENROLLMENT_REQUEST_TTL_MS };
  const revision = await commitDecision(ctx, stored, [{ type: 'put', kind: 'EnrollmentRequest', name: stored.name, value, expectedVersion: stored.resourceVersion, createdAt: stored.createdAt }], r.nodeName);
  await ctx.cache.waitForRevision(revision);
  ctx.log.warn({ id: stored.name, node: r.nodeName, pool: r.pool, address: r.address, decidedBy, reason: value.reason }, 'enrollment request denied');
  return { ...stored, value };
}

async function commitDecision(ctx: DecisionContext, stored: StoredObject<EnrollmentRequestRecord>, ops: WriteOp[], nodeName: string): Promise<number> {
  try {
    return (await ctx.store.commit(ops)).revision;
  } catch (err) {
    if (!(err instanceof ConflictError)) throw err;
    if (err.kind === 'Node') throw nameTaken(nodeName);
    throw new PreconditionFailedError(`EnrollmentRequest/${stored.name} was decided or changed by someone else meanwhile; look again (mcctl get enrollments)`);
  }
}
