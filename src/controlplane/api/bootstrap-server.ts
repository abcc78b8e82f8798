// The bootstrap endpoint, mcplane's Machine Config Server (default port 22623), for hosts that
// have nothing yet but an Ignition pointer config:
//
//   GET  /config/<pool>  with "Authorization: Bearer <bootstrap token>": the pool's rendered
//        config as Ignition (3.x as the Accept header asks, or 2.2), plus what the host needs to
//        join: /etc/mcplane/agent.yaml, the CA certificate and a single-use enrollment token.
//   POST /enroll         {token, nodeName, csr}: signs the host's key as O=mcplane:nodes,CN=<name>.
//   POST /enrollment-requests {nodeName, pool, csr, labels?}, no token: asks to join; the request
//        waits for an operator (mcctl approve enrollment) or an auto-approve rule
//        (enrollment-requests.ts). GET /enrollment-requests/<id> says where it stands, with the
//        certificate once approved. No config is served this way: the host connects with its
//        certificate and its agent gets the pool's config over the stream.
//
// Unlike MCO's server it is not open to whoever reaches the port: rendered configs carry
// secrets (pull secrets, keys), so every config request needs a bootstrap token, and a token
// serves one pool (bootstrap-tokens.ts): a worker's cannot fetch master's config. Failed
// attempts are throttled per client address and per token, and logged within a budget.

import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import { hostname } from 'node:os';
import { stringify } from 'yaml';
import { ConflictError, encodeDataUrl, labelProblem, labelsForPool, toIgnitionV2, type IgnitionConfig, type IgnitionFile, type MachineConfigPool } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import { certificateBinding, certificateRequestKeyId, RESERVED_NODE_NAMES, signNodeCertificate, type KeyPairPem } from '../../runtime/pki.ts';
import { bootstrapTokenPool, type StaticBootstrapToken } from './bootstrap-tokens.ts';
import type { ApiReads, ServingReplica } from './api-access.ts';
import { RateLimiter, type RateLimit } from '../../runtime/rate-limiter.ts';
import { autoApproveRuleFor, caSigner, describeRule, DECIDED_ENROLLMENT_REQUEST_TTL_MS, enrolledNodeRecord, ENROLLMENT_REQUEST_TTL_MS, isLive, MAX_PENDING_ENROLLMENT_REQUESTS, pendingCount, type AutoApproveRule } from './enrollment-requests.ts';
import type { StoredObject, WriteOp } from '../store/store.ts';
import type { EnrollmentRequestRecord, EnrollmentTokenRecord, NodeRecordValue } from '../store/stored-records.ts';

export const DEFAULT_BOOTSTRAP_PORT = 22623;
export const ENROLLMENT_TOKEN_TTL_MS = 24 * 3600_000;
const MAX_BODY_BYTES = 64 * 1024;
const IGNITION_MEDIA_TYPE = 'application/vnd.coreos.ignition+json';
const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** Where the served Ignition puts the agent's bootstrap files on the host. */
export const HOST_PATHS = {
  agentConfig: '/etc/mcplane/agent.yaml',
  ca: '/etc/mcplane/pki/ca.crt',
  cert: '/etc/mcplane/pki/node.crt',
  key: '/etc/mcplane/pki/node.key',
  enrollmentToken: '/etc/mcplane/enrollment-token',
} as const;

export interface BootstrapOptions {
  /** TLS for the endpoint itself (the server certificate). */
  tls: { cert: string | Buffer; key: string | Buffer };
  /** The CA that signs node certificates at enrollment. */
  ca: KeyPairPem;
  /** Tokens from the server's token file, each for one pool (stored ones are read from the cache). */
  staticTokens: StaticBootstrapToken[];
  /**
   * gRPC address agents connect to, as they can reach it (host:port), when the operator set one
   * (--advertise); otherwise every live replica's advertised address, this one first.
   */
  grpcAddress?: string;
  /** How long an enrollment token is valid (default 24 h). */
  tokenTtlMs?: number;
  /** Enrollment tokens issued per client address (default: 20 at once, then 20 a minute). */
  issueRate?: RateLimit;
  /**
   * Failed requests (a wrong bootstrap or enrollment token, a bad request) allowed per client
   * address and per presented token before answering 429 (default: 10 at once, then 10 a minute).
   */
  failureRate?: RateLimit;
  /** This endpoint's address as hosts reach it (host:port), for the enrollment URL; by default
   * the address it listens on, with the port it got and the hostname for a wildcard address. */
  bootstrapAddress?: string;
  /** Enrollment requests approved at once: a pool's hosts whose names match a pattern. */
  autoApprove?: AutoApproveRule[];
  /** Enrollment requests made per client address (default: 10 at once, then 10 a minute). */
  requestRate?: RateLimit;
  /** Enrollment requests waiting for a decision at once (default 1,000); more are refused with 503. */
  maxPendingRequests?: number;
  /** How long a request waits for a decision (default 24 h). */
  requestTtlMs?: number;
}

/** An address as others can reach it: a wildcard listen address becomes this machine's name. */
export function reachableAddress(host: string, port: number): string {
  const h = host.replace(/^\[|\]$/g, '');
  const name = h === '0.0.0.0' || h === '::' || h === '' ? hostname() : host;
  return `${name}:${port}`;
}

export function startBootstrapServer({ cache, store }: ApiReads, replica: Pick<ServingReplica, 'address'>, options: BootstrapOptions, host: string, port: number, log: Logger): Promise<Server> {
  // Each config served issues an enrollment token (a store write): bound what one client can
  // make the store hold, even with the bootstrap token.
  const issuing = new RateLimiter(options.issueRate ?? { burst: 20, perMinute: 20 });
  // Guessing tokens costs attempts: per address, and per token for guesses spread over many
  // addresses. Refusals are logged within a budget too, so a flood cannot flood the journal.
  const failureRate = options.failureRate ?? { burst: 10, perMinute: 10 };
  const failures = new RateLimiter(failureRate);
  // Failures are bounded by the limiter above; its own 429s are logged once a minute per address.
  const throttleLogs = new RateLimiter({ burst: 1, perMinute: 1 });
  // Requests without a token: each is a store write anyone can cause, so bounded per address,
  // and in all by the pending limit.
  const requesting = new RateLimiter(options.requestRate ?? { burst: 10, perMinute: 10 });
  const signer = caSigner(options.ca);
  const autoApprove = options.autoApprove ?? [];
  const failureKeys = (req: IncomingMessage, presented: string | undefined): string[] =>
    [`address:${req.socket.remoteAddress ?? ''}`, ...(presented ? [`token:${hashToken(presented)}`] : [])];
  const server = createServer({ cert: options.tls.cert, key: options.tls.key }, (req, res) => {
    handle(req, res).catch((err: unknown) => {
      log.error({ err, url: req.url }, 'bootstrap request failed');
      if (!res.headersSent) reply(res, 500, { error: 'internal error (logged by the server)' });
    });
  });

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'https://bootstrap');
    // Every refusal is a client's mistake worth a warning: who, what and why, never the
    // headers or the body (they carry tokens and keys).
    res.once('finish', () => {
      const throttledAgain = res.statusCode === 429 && refusals.get(res)?.startsWith('too many failed') && throttleLogs.take(req.socket.remoteAddress ?? '') > 0;
      if (res.statusCode >= 400 && res.statusCode < 500 && !throttledAgain) {
        log.warn({ remote: req.socket.remoteAddress, method: req.method, path: url.pathname, status: res.statusCode, error: refusals.get(res) }, 'bootstrap request refused');
      }
    });
    if (req.method === 'GET' && url.pathname === '/healthz') return reply(res, 200, { status: 'ok' });
    const config = /^\/config\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && config) {
      let pool: string;
      try {
        pool = decodeURIComponent(config[1]!);
      } catch {
        // A client's mistake, not the server's: a 400 and a warning, never a 500 with a stack.
        log.warn({ remote: req.socket.remoteAddress, path: url.pathname }, 'bootstrap request with a malformed pool name');
        return reply(res, 400, { error: `the pool name in ${JSON.stringify(url.pathname)} is not valid percent-encoding` });
      }
      return serveConfig(req, res, pool);
    }
    if (req.method === 'POST' && url.pathname === '/enroll') return enroll(req, res);
    if (req.method === 'POST' && url.pathname === '/enrollment-requests') return createRequest(req, res);
    const requestPath = /^\/enrollment-requests\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && requestPath) return requestStatus(req, res, requestPath[1]!);
    if (throttled(req, res, undefined)) return;
    fail(req, res, undefined, 404, `no such endpoint: ${req.method} ${url.pathname} (GET /config/<pool>, POST /enroll, POST /enrollment-requests, GET /enrollment-requests/<id>)`);
  };

  /** 429 when this client or this token has failed too often lately; true when it answered. */
  const throttled = (req: IncomingMessage, res: ServerResponse, presented: string | undefined): boolean => {
    const wait = Math.max(...failureKeys(req, presented).map((k) => failures.wait(k)));
    if (wait === 0) return false;
    res.setHeader('Retry-After', String(wait));
    reply(res, 429, { error: `too many failed requests from ${req.socket.remoteAddress}${presented ? ' or with this token' : ''}; retry in ${wait} s` });
    return true;
  };
  /** Answers a refusal that counts as a failed attempt. */
  const fail = (req: IncomingMessage, res: ServerResponse, presented: string | undefined, status: number, error: string): void => {
    for (const k of failureKeys(req, presented)) failures.take(k);
    reply(res, status, { error });
  };

  const serveConfig = async (req: IncomingMessage, res: ServerResponse, poolName: string): Promise<void> => {
    const presented = bearer(req);
    if (throttled(req, res, presented)) return;
    if (!presented) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="mcplane bootstrap"');
      return fail(req, res, undefined, 401, 'a bootstrap token is required: send "Authorization: Bearer <token>"');
    }
    const tokenPool = bootstrapTokenPool(presented, options.staticTokens, cache);
    if (tokenPool === undefined) return fail(req, res, presented, 403, 'the bootstrap token is not valid (unknown, deleted or expired)');
    if (tokenPool !== poolName) {
      // A token is scoped to its pool: a worker's token (in every worker's pointer config)
      // must not yield another pool's secrets, nor an enrollment token for it.
      return fail(req, res, presented, 403, `this bootstrap token serves pool ${tokenPool} only; it cannot fetch MachineConfigPool/${poolName}'s config`);
    }
    const stored = cache.pools.get(poolName);
    if (!stored) return reply(res, 404, { error: `MachineConfigPool/${poolName} does not exist` });
    const target = cache.poolTarget(poolName);
    const rendered = target ? cache.renderedConfig(target) : undefined;
    if (!rendered) return reply(res, 503, { error: `MachineConfigPool/${poolName} has no rendered config yet` });
    const version = negotiateVersion(req.headers.accept);
    if (!version) return reply(res, 406, { error: 'no acceptable Ignition version: this server serves 2.2.0 and 3.0.0-3.5.0' });

    const wait = issuing.take(req.socket.remoteAddress ?? '');
    if (wait > 0) {
      log.warn({ pool: poolName, remote: req.socket.remoteAddress, retryAfterSeconds: wait }, 'bootstrap config requests from this client are over the rate limit');
      res.setHeader('Retry-After', String(wait));
      return reply(res, 429, { error: `too many config requests from ${req.socket.remoteAddress}: each issues an enrollment token; retry in ${wait} s` });
    }
    const token = randomBytes(32).toString('base64url');
    const now = Date.now();
    await store.commit([{
      type: 'put', kind: 'EnrollmentToken', name: hashToken(token), expectedVersion: null,
      value: { pool: poolName, issuedAt: now, expiresAt: now + (options.tokenTtlMs ?? ENROLLMENT_TOKEN_TTL_MS) } satisfies EnrollmentTokenRecord,
    }]);
    const ignition = withBootstrapFiles(rendered.spec.config, stored.value, token, { ...options, bootstrapAddress, servers: agentServers() });
    const body = version === '2.2.0' ? toIgnitionV2(ignition) : { ...ignition, ignition: { version } };
    log.info({ pool: poolName, config: rendered.name, version, remote: req.socket.remoteAddress }, 'served bootstrap Ignition');
    res.setHeader('Content-Type', `${IGNITION_MEDIA_TYPE}; version=${version}`);
    res.setHeader('Cache-Control', 'no-store');
    reply(res, 200, body);
  };

  const enroll = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (throttled(req, res, undefined)) return;
    const body = await readJson(req);
    if (!body.ok) return fail(req, res, undefined, 400, body.error);
    const { token, nodeName, csr } = body.value as { token?: unknown; nodeName?: unknown; csr?: unknown };
    if (typeof token !== 'string' || typeof nodeName !== 'string' || typeof csr !== 'string') {
      return fail(req, res, undefined, 400, 'the body must be JSON {"token": string, "nodeName": string, "csr": PEM string}');
    }
    if (throttled(req, res, token)) return;
    if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(nodeName)) {
      return fail(req, res, token, 400, `nodeName ${JSON.stringify(nodeName.slice(0, 300))} is not a DNS subdomain (lowercase letters, digits, "-", ".")`);
    }
    if (RESERVED_NODE_NAMES.has(nodeName)) {
      return reply(res, 400, { error: `nodeName "${nodeName}" is reserved: it is etcd's administrator user, which a node certificate must never map to` });
    }
    const stored = await store.get<EnrollmentTokenRecord>('EnrollmentToken', hashToken(token));
    if (!stored) return fail(req, res, token, 403, 'the enrollment token is not valid');
    if (stored.value.usedBy) return fail(req, res, token, 403, `the enrollment token was already used by node ${stored.value.usedBy}`);
    if (stored.value.expiresAt < Date.now()) return fail(req, res, token, 403, 'the enrollment token has expired; fetch the Ignition config again');
    const taken = (): void => reply(res, 409, { error: `Node/${nodeName} is already registered; a new host cannot take its identity (delete the node first: mcctl delete node ${nodeName})` });
    if (cache.nodeRecords.has(nodeName)) return taken();
    let certificate: string;
    try {
      // The certificate binds the node to the pool it enrolled for (OU): it joins that role and
      // cannot claim another, whatever its agent.yaml says.
      certificate = await signNodeCertificate(options.ca, csr, nodeName, stored.value.pool, cache.nodeGeneration(nodeName));
    } catch (err) {
      return fail(req, res, token, 400, `the certificate request is not valid: ${(err as Error).message}`);
    }
    // One commit spends the token and reserves the name, on whichever replica: two hosts
    // enrolling as one name, or one token used twice, get one certificate between them.
    try {
      await store.commit([
        { type: 'put', kind: 'EnrollmentToken', name: stored.name, expectedVersion: stored.resourceVersion, value: { ...stored.value, usedBy: nodeName, usedAt: Date.now() } satisfies EnrollmentTokenRecord },
        // Bound to this certificate from the start: no other certificate for the name (an older
        // host's, say) is accepted for this node.
        { type: 'put', kind: 'Node', name: nodeName, expectedVersion: null, value: { labels: labelsForPool(cache.pools.get(stored.value.pool)?.value, stored.value.pool), enrolledFor: stored.value.pool, registered: false, certificate: certificateBinding(certificate) } satisfies NodeRecordValue },
      ]);
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      if (err.kind === 'Node') return taken();
      return reply(res, 403, { error: 'the enrollment token was already used' });
    }
    log.info({ node: nodeName, pool: stored.value.pool }, 'node enrolled');
    reply(res, 200, { certificate, ca: options.ca.certPem });
  };

  /** What the host polling its request is told: no operator names, the certificate once signed. */
  const requestBody = (id: string, r: EnrollmentRequestRecord): Record<string, unknown> => ({
    id, nodeName: r.nodeName, pool: r.pool, state: r.state, requestedAt: new Date(r.requestedAt).toISOString(),
    ...(r.state === 'Denied' ? { reason: r.reason ?? '' } : {}),
    ...(r.certificate ? { certificate: r.certificate, ca: options.ca.certPem } : {}),
  });

  const createRequest = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (throttled(req, res, undefined)) return;
    const body = await readJson(req);
    if (!body.ok) return fail(req, res, undefined, 400, body.error);
    const { nodeName, pool, csr, labels } = (body.value ?? {}) as { nodeName?: unknown; pool?: unknown; csr?: unknown; labels?: unknown };
    const labelsOk = labels === undefined || (typeof labels === 'object' && labels !== null && !Array.isArray(labels) && Object.values(labels).every((v) => typeof v === 'string'));
    if (typeof nodeName !== 'string' || typeof pool !== 'string' || typeof csr !== 'string' || !labelsOk) {
      return fail(req, res, undefined, 400, 'the body must be JSON {"nodeName": string, "pool": string, "csr": PEM string, "labels"?: {string: string}}');
    }
    if (!NAME.test(nodeName)) return fail(req, res, undefined, 400, `nodeName ${JSON.stringify(nodeName.slice(0, 300))} is not a DNS subdomain (lowercase letters, digits, "-", ".")`);
    if (RESERVED_NODE_NAMES.has(nodeName)) {
      return fail(req, res, undefined, 400, `nodeName "${nodeName}" is reserved: it is etcd's administrator user, which a node certificate must never map to`);
    }
    if (!NAME.test(pool)) return fail(req, res, undefined, 400, `pool ${JSON.stringify(pool.slice(0, 300))} is not a pool name (a DNS subdomain)`);
    const asked = (labels ?? {}) as Record<string, string>;
    const badLabel = Object.entries(asked).map(([k, v]) => labelProblem(k, v)).find(Boolean);
    if (Object.keys(asked).length > 64 || badLabel) return fail(req, res, undefined, 400, `labels: ${badLabel ?? 'at most 64'}`);
    let id: string;
    try {
      id = await certificateRequestKeyId(csr);
    } catch (err) {
      return fail(req, res, undefined, 400, `the certificate request is not valid: ${(err as Error).message}`);
    }
    const now = Date.now();
    const existing = cache.enrollmentRequests.get(id) ?? await store.get<EnrollmentRequestRecord>('EnrollmentRequest', id);
    if (existing && isLive(existing.value, now)) {
      // The same key asking again (a host retrying after a lost answer): the same request.
      if (existing.value.nodeName !== nodeName || existing.value.pool !== pool) {
        return reply(res, 409, { error: `this key already asked to join as ${existing.value.nodeName} in pool ${existing.value.pool} (request ${id}); poll GET /enrollment-requests/${id}, or ask with a new key` });
      }
      res.setHeader('Location', `/enrollment-requests/${id}`);
      return answerRequest(res, await signedIfApproved(existing));
    }
    const wait = requesting.take(req.socket.remoteAddress ?? '');
    if (wait > 0) {
      res.setHeader('Retry-After', String(wait));
      return reply(res, 429, { error: `too many enrollment requests from ${req.socket.remoteAddress}; retry in ${wait} s` });
    }
    const rule = autoApproveRuleFor(autoApprove, pool, nodeName);
    const autoApproved = rule !== undefined && cache.pools.has(pool) && !cache.nodeRecords.has(nodeName);
    const limit = options.maxPendingRequests ?? MAX_PENDING_ENROLLMENT_REQUESTS;
    // A request approved at once never waits, so a full queue does not hold up the rules' hosts.
    if (!autoApproved && pendingCount(cache, now) >= limit) {
      log.warn({ pending: limit, node: nodeName, pool, remote: req.socket.remoteAddress }, 'enrollment request refused: too many requests are pending');
      res.setHeader('Retry-After', '600');
      return reply(res, 503, { error: `${limit} enrollment requests are already waiting for an operator (the limit); retry later, once some are approved, denied or expired` });
    }
    let record: EnrollmentRequestRecord = {
      nodeName, pool, csr, ...(labels ? { labels: asked } : {}), requestedAt: now, address: req.socket.remoteAddress ?? '', state: 'Pending',
      expiresAt: now + (options.requestTtlMs ?? ENROLLMENT_REQUEST_TTL_MS),
    };
    // An expired request of the same key not yet collected is replaced.
    const ops: WriteOp[] = [{ type: 'put', kind: 'EnrollmentRequest', name: id, value: record, expectedVersion: existing ? existing.resourceVersion : null }];
    if (rule && autoApproved) {
      const certificate = await signer.signNode(csr, nodeName, pool, cache.nodeGeneration(nodeName));
      record = { ...record, state: 'Approved', decidedBy: `auto-approve rule ${describeRule(rule)}`, decidedAt: now, certificate, expiresAt: now + DECIDED_ENROLLMENT_REQUEST_TTL_MS };
      ops[0] = { ...ops[0]!, value: record } as WriteOp;
      ops.push({ type: 'put', kind: 'Node', name: nodeName, expectedVersion: null, value: enrolledNodeRecord(cache, pool, certificate) });
    } else if (rule) {
      log.warn({ node: nodeName, pool, rule: describeRule(rule) }, `an auto-approve rule matches the enrollment request, but ${cache.pools.has(pool) ? `Node/${nodeName} is already registered` : `MachineConfigPool/${pool} does not exist`}: left for an operator`);
    }
    let revision: number;
    try {
      ({ revision } = await store.commit(ops));
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      return reply(res, 409, { error: err.kind === 'Node' ? `Node/${nodeName} was registered meanwhile; ask again under another name` : 'the same key asked at the same time; poll the request' });
    }
    await cache.waitForRevision(revision);
    if (record.state === 'Approved') log.info({ id, node: nodeName, pool, remote: req.socket.remoteAddress, decidedBy: record.decidedBy }, 'enrollment request auto-approved');
    else log.info({ id, node: nodeName, pool, remote: req.socket.remoteAddress }, 'enrollment request waits for an operator (mcctl get enrollments)');
    res.setHeader('Location', `/enrollment-requests/${id}`);
    answerRequest(res, { name: id, value: record });
  };

  const requestStatus = async (req: IncomingMessage, res: ServerResponse, id: string): Promise<void> => {
    if (throttled(req, res, undefined)) return;
    const stored = /^[0-9a-f]{64}$/.test(id) ? cache.enrollmentRequests.get(id) ?? await store.get<EnrollmentRequestRecord>('EnrollmentRequest', id) : undefined;
    // An unknown id counts as a failure: polling a guessed id is guessing.
    if (!stored || !isLive(stored.value)) return fail(req, res, undefined, 404, `no enrollment request ${id.slice(0, 64)} (it expired, or was never made): POST /enrollment-requests again`);
    answerRequest(res, await signedIfApproved(stored));
  };

  /** 202 while pending, 200 once decided. */
  const answerRequest = (res: ServerResponse, r: { name: string; value: EnrollmentRequestRecord }): void => {
    res.setHeader('Cache-Control', 'no-store');
    reply(res, r.value.state === 'Pending' ? 202 : 200, requestBody(r.name, r.value));
  };

  /**
   * An approval stored by a replica without the CA key has no certificate: signed here when the
   * host polls, and bound to the Node record the approval reserved, in one commit.
   */
  const signedIfApproved = async (stored: StoredObject<EnrollmentRequestRecord>): Promise<{ name: string; value: EnrollmentRequestRecord }> => {
    const r = stored.value;
    if (r.state !== 'Approved' || r.certificate) return stored;
    const node = cache.nodeRecords.get(r.nodeName);
    if (!node || node.value.enrolledFor !== r.pool || node.value.certificate) {
      // The reserved record was deleted or bound elsewhere since the approval: nothing to sign
      // for any more. Recorded, so the operator sees it too.
      const value: EnrollmentRequestRecord = { ...r, state: 'Denied', reason: `Node/${r.nodeName} was deleted or bound to another certificate after the approval; ask again with a new key` };
      await store.commit([{ type: 'put', kind: 'EnrollmentRequest', name: stored.name, value, expectedVersion: stored.resourceVersion, createdAt: stored.createdAt }]).catch((err: unknown) => {
        if (!(err instanceof ConflictError)) throw err;
      });
      return { name: stored.name, value };
    }
    const certificate = await signer.signNode(r.csr, r.nodeName, r.pool, cache.nodeGeneration(r.nodeName));
    const value: EnrollmentRequestRecord = { ...r, certificate };
    try {
      const { revision } = await store.commit([
        { type: 'put', kind: 'EnrollmentRequest', name: stored.name, value, expectedVersion: stored.resourceVersion, createdAt: stored.createdAt },
        { type: 'put', kind: 'Node', name: r.nodeName, value: { ...node.value, certificate: certificateBinding(certificate) } satisfies NodeRecordValue, expectedVersion: node.resourceVersion, createdAt: node.createdAt },
      ]);
      await cache.waitForRevision(revision);
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      // Another poll signed first (or the node changed): the stored answer is the one to give.
      const again = await store.get<EnrollmentRequestRecord>('EnrollmentRequest', stored.name);
      return again?.value.certificate ? again : { name: stored.name, value: { ...r, state: 'Pending' } };
    }
    log.info({ id: stored.name, node: r.nodeName, pool: r.pool }, 'signed the certificate of an approved enrollment request');
    return { name: stored.name, value };
  };

  /** Where a new host's agent connects: every replica, so it can move when one is lost. */
  const agentServers = (): string[] => {
    if (options.grpcAddress) return options.grpcAddress.split(',').map((a) => a.trim()).filter(Boolean);
    const self = replica.address;
    const others = [...cache.replicas.values()].map((r) => r.value.address).filter((a) => a && a !== self).sort();
    return [self, ...others];
  };

  let bootstrapAddress = options.bootstrapAddress ?? '';
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      bootstrapAddress ||= reachableAddress(host, (server.address() as { port: number }).port);
      resolve(server);
    });
  });
}

/**
 * Picks the Ignition version to serve from an Accept header such as
 * "application/vnd.coreos.ignition+json;version=3.4.0, ...;version=2.2.0". The highest 3.x the
 * host asks for is served (capped at 3.5.0: a newer Ignition reads older configs); 2.2.0 only when
 * the host asks for nothing newer; 3.4.0 when it does not say.
 */
export function negotiateVersion(accept: string | undefined): string | undefined {
  const asked: [number, number][] = [];
  for (const range of (accept ?? '').split(',')) {
    const m = /version=\s*"?(\d+)\.(\d+)\.\d+/.exec(range);
    if (m && range.trim().startsWith(IGNITION_MEDIA_TYPE)) asked.push([Number(m[1]), Number(m[2])]);
  }
  if (asked.length === 0) return '3.4.0';
  const v3 = asked.filter(([major]) => major === 3).map(([, minor]) => minor);
  if (v3.length) return `3.${Math.min(5, Math.max(...v3))}.0`;
  if (asked.some(([major, minor]) => major === 2 && minor >= 2)) return '2.2.0';
  return undefined;
}

function withBootstrapFiles(config: IgnitionConfig, pool: MachineConfigPool, token: string, options: BootstrapOptions & { bootstrapAddress: string; servers: string[] }): IgnitionConfig {
  const labels = labelsForPool(pool, pool.metadata.name);
  const agentConfig = stringify({
    servers: options.servers,
    tls: { ca: HOST_PATHS.ca, cert: HOST_PATHS.cert, key: HOST_PATHS.key },
    enrollment: { url: `https://${options.bootstrapAddress}/enroll`, tokenFile: HOST_PATHS.enrollmentToken },
    labels,
  });
  const file = (path: string, text: string, mode: number): IgnitionFile => ({
    path, mode, overwrite: true, contents: { source: encodeDataUrl(Buffer.from(text)) },
  });
  const extras = [
    file(HOST_PATHS.agentConfig, `# Written by mcplane's bootstrap endpoint for pool ${pool.metadata.name}\n${agentConfig}`, 0o644),
    file(HOST_PATHS.ca, options.ca.certPem, 0o644),
    file(HOST_PATHS.enrollmentToken, token, 0o600),
  ];
  const extraPaths = new Set(extras.map((f) => f.path));
  return {
    ...config,
    storage: { ...config.storage, files: [...config.storage.files.filter((f) => !extraPaths.has(f.path)), ...extras] },
    systemd: { units: [...config.systemd.units.filter((u) => u.name !== 'mcplane-agent.service'), { name: 'mcplane-agent.service', enabled: true }] },
  };
}

function bearer(req: IncomingMessage): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  return m ? m[1]! : undefined;
}

function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** Why a response refused its request, for the warning logged when it finishes. */
const refusals = new WeakMap<ServerResponse, string>();

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  if (status >= 400 && typeof (body as { error?: unknown }).error === 'string') refusals.set(res, (body as { error: string }).error);
  res.statusCode = status;
  if (!res.hasHeader('Content-Type')) res.setHeader('Content-Type', 'application/json');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

async function readJson(req: IncomingMessage): Promise<{ ok: true; value: unknown } | { ok: false; error: string }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return { ok: false, error: `the body is larger than ${MAX_BODY_BYTES} bytes` };
    chunks.push(chunk as Buffer);
  }
  try {
    return { ok: true, value: JSON.parse(Buffer.concat(chunks).toString('utf8')) };
  } catch (err) {
    return { ok: false, error: `the body is not JSON: ${(err as Error).message}` };
  }
}
