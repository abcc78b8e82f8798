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
// attempts are throttled per client address, and those without a valid credential per network
// and per presented token too (never a valid token: it is shared by a pool's hosts, and one of
// them must not lock the others out). Refusals are logged within a budget.

import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import { hostname } from 'node:os';
import { stringify } from 'yaml';
import { ConflictError, encodeDataUrl, isDnsSubdomain, labelProblem, labelsForPool, nodeNameProblem, toIgnitionV2, type IgnitionConfig, type IgnitionFile, type MachineConfigPool } from '../../machineconfig/index.ts';
import type { Logger } from '../../runtime/logger.ts';
import { certificateBinding, certificateRequestKeyId, RESERVED_NODE_NAMES, signNodeCertificate, type KeyPairPem } from '../../runtime/pki.ts';
import { validBootstrapToken, type StaticBootstrapToken } from './bootstrap-tokens.ts';
import { bootstrapTokenLive } from '../cache/enrollment-liveness.ts';
import type { ApiReads, ServingReplica } from './api-access.ts';
import { RateLimiter, sourceNetwork, type RateLimit } from '../../runtime/rate-limiter.ts';
import { AUTO_APPROVED_BY, autoApproveRuleFor, caSigner, describeRule, enrolledNodeRecord, ENROLLMENT_REQUEST_IDLE_TTL_MS, ENROLLMENT_REQUEST_TTL_MS, isLive, MAX_CSR_CHARS, MAX_ENROLLMENT_BODY_BYTES, MAX_FULL_QUEUE_RETRY_AFTER_S, MAX_PENDING_ENROLLMENT_REQUESTS, MAX_REQUEST_LABEL_CHARS, MAX_REQUEST_LABELS, queuedRequests, type AutoApproveRule } from './enrollment-requests.ts';
import type { StoredObject, WriteOp } from '../store/store.ts';
import type { EnrollmentRequestRecord, EnrollmentTokenRecord, NodeRecordValue } from '../store/stored-records.ts';

export const DEFAULT_BOOTSTRAP_PORT = 22623;
export const ENROLLMENT_TOKEN_TTL_MS = 24 * 3600_000;
/** A body read past its limit and thrown away before answering 413; longer ones cut the connection. */
const MAX_DRAINED_BYTES = 1024 * 1024;
const IGNITION_MEDIA_TYPE = 'application/vnd.coreos.ignition+json';

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
   * address, and per presented token that is not valid, before answering 429 (default: 10 at
   * once, then 10 a minute); five times as many per network (IPv4 /24, IPv6 /64) for requests
   * without a valid credential.
   */
  failureRate?: RateLimit;
  /** This endpoint's address as hosts reach it (host:port), for the enrollment URL; by default
   * the address it listens on, with the port it got and the hostname for a wildcard address. */
  bootstrapAddress?: string;
  /** Enrollment requests approved at once: a pool's hosts whose names match a pattern. */
  autoApprove?: AutoApproveRule[];
  /** Refusals logged per client address (default: 10 at once, then 10 a minute; six times that in all). */
  refusalLogRate?: RateLimit;
  /** Enrollment requests made per client address (default: 10 at once, then 10 a minute). */
  requestRate?: RateLimit;
  /** Enrollment requests made per network, IPv4 /24 or IPv6 /64 (default: 20 at once, then 20 a minute). */
  requestNetworkRate?: RateLimit;
  /** Enrollment requests made in all, on this replica (default: 100 at once, then 60 a minute). */
  requestTotalRate?: RateLimit;
  /**
   * Requests waiting at once, pending or auto-approved and not yet connected (default 1,000);
   * more are refused with 503 and a Retry-After of at most a minute.
   */
  maxPendingRequests?: number;
  /** How long a request waits for a decision at most, however long its host polls (default 24 h). */
  requestTtlMs?: number;
  /**
   * How long a pending request lives unpolled, and an auto-approved host has to connect before its
   * node is deleted with the request (default 15 min).
   */
  requestIdleTtlMs?: number;
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
  // Guessing costs attempts: per address; and, for requests with no valid credential, per
  // network (one client owns many neighbouring addresses) and per presented token (guesses of one
  // token spread over many addresses). A valid token is never throttled as such: the worker
  // token is in every worker's pointer config, and ten failures by one holder locked every other
  // host out of its pool.
  const failureRate = options.failureRate ?? { burst: 10, perMinute: 10 };
  const failures = new RateLimiter(failureRate);
  const networkFailures = new RateLimiter({ burst: 5 * failureRate.burst, perMinute: 5 * failureRate.perMinute });
  // Refusals are logged within a budget, so a flood cannot flood the journal: the failure
  // limiter's own 429s once a minute per address, any refusal 10 a minute per address and 60 a
  // minute in all; what is left out is counted in the next line logged.
  const throttleLogs = new RateLimiter({ burst: 1, perMinute: 1 });
  const refusalLogRate = options.refusalLogRate ?? { burst: 10, perMinute: 10 };
  const refusalLogs = new RateLimiter(refusalLogRate);
  const allRefusalLogs = new RateLimiter({ burst: 6 * refusalLogRate.burst, perMinute: 6 * refusalLogRate.perMinute });
  let unlogged = 0;
  // Requests without a token: each is a store write anyone can cause, so bounded per address,
  // per network and in all, and by the queue's limit.
  const requesting = new RateLimiter(options.requestRate ?? { burst: 10, perMinute: 10 });
  const networkRequesting = new RateLimiter(options.requestNetworkRate ?? { burst: 20, perMinute: 20 });
  const allRequesting = new RateLimiter(options.requestTotalRate ?? { burst: 100, perMinute: 60 });
  const requestTtlMs = options.requestTtlMs ?? ENROLLMENT_REQUEST_TTL_MS;
  const idleTtlMs = options.requestIdleTtlMs ?? ENROLLMENT_REQUEST_IDLE_TTL_MS;
  const signer = caSigner(options.ca);
  const autoApprove = options.autoApprove ?? [];
  // The client's address, read when the request arrives: once a body is cut short the socket may
  // be gone, and reading it then threw (a 500 with a stack trace per oversized body).
  const remotes = new WeakMap<IncomingMessage, string>();
  const remote = (req: IncomingMessage): string => remotes.get(req) ?? '';
  const failureKeys = (req: IncomingMessage, scope: Scope): [RateLimiter, string][] => [
    [failures, `address:${remote(req)}`],
    ...(scope.network ? [[networkFailures, `network:${sourceNetwork(remote(req))}`] as [RateLimiter, string]] : []),
    ...(scope.token ? [[failures, `token:${hashToken(scope.token)}`] as [RateLimiter, string]] : []),
  ];
  const server = createServer({ cert: options.tls.cert, key: options.tls.key }, (req, res) => {
    remotes.set(req, req.socket.remoteAddress ?? '');
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
      if (res.statusCode < 400 || res.statusCode >= 500) return;
      const address = remote(req);
      const throttledAgain = res.statusCode === 429 && refusals.get(res)?.startsWith('too many failed') && throttleLogs.take(address) > 0;
      if (throttledAgain || refusalLogs.take(address) > 0 || allRefusalLogs.take('all') > 0) {
        unlogged++;
        return;
      }
      log.warn({ remote: address, method: req.method, path: url.pathname, status: res.statusCode, error: refusals.get(res), ...(unlogged ? { refusalsNotLogged: unlogged } : {}) }, 'bootstrap request refused');
      unlogged = 0;
    });
    if (req.method === 'GET' && url.pathname === '/healthz') return reply(res, 200, { status: 'ok' });
    const config = /^\/config\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && config) {
      let pool: string;
      try {
        pool = decodeURIComponent(config[1]!);
      } catch {
        // A client's mistake, not the server's: a 400 and a warning, never a 500 with a stack.
        log.warn({ remote: remote(req), path: url.pathname }, 'bootstrap request with a malformed pool name');
        return reply(res, 400, { error: `the pool name in ${JSON.stringify(url.pathname)} is not valid percent-encoding` });
      }
      return serveConfig(req, res, pool);
    }
    if (req.method === 'POST' && url.pathname === '/enroll') return enroll(req, res);
    if (req.method === 'POST' && url.pathname === '/enrollment-requests') return createRequest(req, res);
    const requestPath = /^\/enrollment-requests\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && requestPath) return requestStatus(req, res, requestPath[1]!);
    if (throttled(req, res, ANONYMOUS)) return;
    fail(req, res, ANONYMOUS, 404, `no such endpoint: ${req.method} ${url.pathname} (GET /config/<pool>, POST /enroll, POST /enrollment-requests, GET /enrollment-requests/<id>)`);
  };

  /** 429 when this client (or its network, or this token) has failed too often lately; true when it answered. */
  const throttled = (req: IncomingMessage, res: ServerResponse, scope: Scope): boolean => {
    const wait = Math.max(...failureKeys(req, scope).map(([limiter, k]) => limiter.wait(k)));
    if (wait === 0) return false;
    res.setHeader('Retry-After', String(wait));
    reply(res, 429, { error: `too many failed requests from ${remote(req)}${scope.network ? ' or its network' : ''}${scope.token ? ' or with this token' : ''}; retry in ${wait} s` });
    return true;
  };
  /** Answers a refusal that counts as a failed attempt. */
  const fail = (req: IncomingMessage, res: ServerResponse, scope: Scope, status: number, error: string): void => {
    for (const [limiter, k] of failureKeys(req, scope)) limiter.take(k);
    reply(res, status, { error });
  };
  /** A refusal of a request without a valid credential: 429 once its address, network or token failed too often. */
  const refuseInvalid = (req: IncomingMessage, res: ServerResponse, scope: Scope, status: number, error: string): void => {
    if (!throttled(req, res, scope)) fail(req, res, scope, status, error);
  };
  /** The body as JSON; a 413 (a failure, with the connection closed when the rest was not read) or a 400 answered when not. */
  const jsonBody = async (req: IncomingMessage, res: ServerResponse): Promise<{ value: unknown } | undefined> => {
    const body = await readJson(req);
    if (body.ok) return { value: body.value };
    if (body.status === 413 && !req.complete) res.setHeader('Connection', 'close');
    fail(req, res, ANONYMOUS, body.status, body.error);
    return undefined;
  };

  const serveConfig = async (req: IncomingMessage, res: ServerResponse, poolName: string): Promise<void> => {
    const presented = bearer(req);
    const valid = presented ? validBootstrapToken(presented, options.staticTokens, cache) : undefined;
    // A valid token's failures count against the address alone (see failureRate).
    const scope: Scope = valid ? {} : { network: true, ...(presented ? { token: presented } : {}) };
    if (throttled(req, res, scope)) return;
    if (!presented) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="mcplane bootstrap"');
      return fail(req, res, scope, 401, 'a bootstrap token is required: send "Authorization: Bearer <token>"');
    }
    if (valid === undefined) return fail(req, res, scope, 403, 'the bootstrap token is not valid (unknown, deleted or expired)');
    const tokenPool = valid.pool;
    if (tokenPool !== poolName) {
      // A token is scoped to its pool: a worker's token (in every worker's pointer config)
      // must not yield another pool's secrets, nor an enrollment token for it.
      return fail(req, res, scope, 403, `this bootstrap token serves pool ${tokenPool} only; it cannot fetch MachineConfigPool/${poolName}'s config`);
    }
    const stored = cache.pools.get(poolName);
    if (!stored) return reply(res, 404, { error: `MachineConfigPool/${poolName} does not exist` });
    const target = cache.poolTarget(poolName);
    const rendered = target ? cache.renderedConfig(target) : undefined;
    if (!rendered) return reply(res, 503, { error: `MachineConfigPool/${poolName} has no rendered config yet` });
    const version = negotiateVersion(req.headers.accept);
    if (!version) return reply(res, 406, { error: 'no acceptable Ignition version: this server serves 2.2.0 and 3.0.0-3.5.0' });

    const wait = issuing.take(remote(req));
    if (wait > 0) {
      if (throttleLogs.take(`issuing:${remote(req)}`) === 0) log.warn({ pool: poolName, remote: remote(req), retryAfterSeconds: wait }, 'bootstrap config requests from this client are over the rate limit');
      res.setHeader('Retry-After', String(wait));
      return reply(res, 429, { error: `too many config requests from ${remote(req)}: each issues an enrollment token; retry in ${wait} s` });
    }
    const token = randomBytes(32).toString('base64url');
    const now = Date.now();
    await store.commit([{
      type: 'put', kind: 'EnrollmentToken', name: hashToken(token), expectedVersion: null,
      value: { pool: poolName, issuedAt: now, expiresAt: now + (options.tokenTtlMs ?? ENROLLMENT_TOKEN_TTL_MS), mintedBy: valid.ref } satisfies EnrollmentTokenRecord,
    }]);
    const ignition = withBootstrapFiles(rendered.spec.config, stored.value, token, { ...options, bootstrapAddress, servers: agentServers() });
    const body = version === '2.2.0' ? toIgnitionV2(ignition) : { ...ignition, ignition: { version } };
    log.info({ pool: poolName, config: rendered.name, version, remote: remote(req) }, 'served bootstrap Ignition');
    res.setHeader('Content-Type', `${IGNITION_MEDIA_TYPE}; version=${version}`);
    res.setHeader('Cache-Control', 'no-store');
    reply(res, 200, body);
  };

  const enroll = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (throttled(req, res, {})) return;
    const body = await jsonBody(req, res);
    if (!body) return;
    const { token, nodeName, csr } = (body.value ?? {}) as { token?: unknown; nodeName?: unknown; csr?: unknown };
    if (typeof token !== 'string' || typeof nodeName !== 'string' || typeof csr !== 'string') {
      return fail(req, res, ANONYMOUS, 400, 'the body must be JSON {"token": string, "nodeName": string, "csr": PEM string}');
    }
    // The token's own bucket fills only with its failures as an invalid token, so a valid one is
    // never refused here.
    if (throttled(req, res, { token })) return;
    const nameProblem = nodeNameProblem(nodeName);
    if (nameProblem) return fail(req, res, {}, 400, `nodeName ${nameProblem}`);
    if (RESERVED_NODE_NAMES.has(nodeName)) {
      return reply(res, 400, { error: `nodeName "${nodeName}" is reserved: it is etcd's administrator user, which a node certificate must never map to` });
    }
    const stored = await store.get('EnrollmentToken', hashToken(token));
    const invalid: Scope = { network: true, token };
    if (!stored) return refuseInvalid(req, res, invalid, 403, 'the enrollment token is not valid');
    if (stored.value.usedBy) return refuseInvalid(req, res, invalid, 403, `the enrollment token was already used by node ${stored.value.usedBy}`);
    if (stored.value.expiresAt < Date.now()) return refuseInvalid(req, res, invalid, 403, 'the enrollment token has expired; fetch the Ignition config again');
    if (stored.value.mintedBy !== undefined && !bootstrapTokenLive(stored.value.mintedBy, options.staticTokens, cache)) {
      // Deleting a leaked bootstrap token must end what it paid for, not leave a day of enrollments.
      const which = stored.value.mintedBy.startsWith('file:') ? 'the token file no longer holds it' : `BootstrapToken/${stored.value.mintedBy} was deleted or has expired`;
      return refuseInvalid(req, res, invalid, 403, `the enrollment token is no longer valid: the bootstrap token it was issued with is not (${which}); fetch the config again with a valid bootstrap token`);
    }
    const taken = (): void => reply(res, 409, { error: `Node/${nodeName} is already registered; a new host cannot take its identity (delete the node first: mcctl delete node ${nodeName})` });
    if (cache.nodeRecords.has(nodeName)) return taken();
    let certificate: string;
    try {
      // The certificate binds the node to the pool it enrolled for (OU): it joins that role and
      // cannot claim another, whatever its agent.yaml says.
      certificate = await signNodeCertificate(options.ca, csr, nodeName, stored.value.pool, cache.nodeGeneration(nodeName));
    } catch (err) {
      return fail(req, res, {}, 400, `the certificate request is not valid: ${(err as Error).message}`);
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
    if (throttled(req, res, ANONYMOUS)) return;
    const body = await jsonBody(req, res);
    if (!body) return;
    const { nodeName, pool, csr, labels } = (body.value ?? {}) as { nodeName?: unknown; pool?: unknown; csr?: unknown; labels?: unknown };
    const labelsOk = labels === undefined || (typeof labels === 'object' && labels !== null && !Array.isArray(labels) && Object.values(labels).every((v) => typeof v === 'string'));
    if (typeof nodeName !== 'string' || typeof pool !== 'string' || typeof csr !== 'string' || !labelsOk) {
      return fail(req, res, ANONYMOUS, 400, 'the body must be JSON {"nodeName": string, "pool": string, "csr": PEM string, "labels"?: {string: string}}');
    }
    const nameProblem = nodeNameProblem(nodeName);
    if (nameProblem) return fail(req, res, ANONYMOUS, 400, `nodeName ${nameProblem}`);
    if (RESERVED_NODE_NAMES.has(nodeName)) {
      return fail(req, res, ANONYMOUS, 400, `nodeName "${nodeName}" is reserved: it is etcd's administrator user, which a node certificate must never map to`);
    }
    if (!isDnsSubdomain(pool)) return fail(req, res, ANONYMOUS, 400, `pool ${JSON.stringify(pool.slice(0, 300))} is not a pool name (an RFC 1123 subdomain)`);
    if (csr.length > MAX_CSR_CHARS) return fail(req, res, ANONYMOUS, 400, `csr: ${csr.length} characters; a certificate request may have at most ${MAX_CSR_CHARS} (a P-256 one has about 500)`);
    const asked = (labels ?? {}) as Record<string, string>;
    const entries = Object.entries(asked);
    const labelChars = entries.reduce((n, [k, v]) => n + k.length + v.length, 0);
    if (entries.length > MAX_REQUEST_LABELS || labelChars > MAX_REQUEST_LABEL_CHARS) {
      return fail(req, res, ANONYMOUS, 400, `labels: ${entries.length} labels of ${labelChars} characters; a request may carry at most ${MAX_REQUEST_LABELS} labels of ${MAX_REQUEST_LABEL_CHARS} characters in all (keys and values)`);
    }
    const badLabel = entries.map(([k, v]) => labelProblem(k, v)).find(Boolean);
    if (badLabel) return fail(req, res, ANONYMOUS, 400, `labels: ${badLabel}`);
    let id: string;
    try {
      id = await certificateRequestKeyId(csr);
    } catch (err) {
      return fail(req, res, ANONYMOUS, 400, `the certificate request is not valid: ${(err as Error).message}`);
    }
    const now = Date.now();
    const existing = cache.enrollmentRequests.get(id) ?? await store.get('EnrollmentRequest', id);
    if (existing && isLive(existing.value, now)) {
      // The same key asking again (a host retrying after a lost answer): the same request.
      if (existing.value.nodeName !== nodeName || existing.value.pool !== pool) {
        return fail(req, res, ANONYMOUS, 409, `this key already asked to join as ${existing.value.nodeName} in pool ${existing.value.pool} (request ${id}); poll GET /enrollment-requests/${id}, or ask with a new key`);
      }
      res.setHeader('Location', `/enrollment-requests/${id}`);
      return answerRequest(res, await signedIfApproved(await keptAlive(existing, now)));
    }
    // Each new request is a store write anyone can cause: per address, per network (a client
    // with many addresses has neighbouring ones) and in all. Auto-approvals count alike.
    const address = remote(req);
    const limits: [RateLimiter, string, string][] = [[requesting, address, address], [networkRequesting, sourceNetwork(address), `network ${sourceNetwork(address)}`], [allRequesting, 'all', 'all clients together']];
    for (const [limiter, key, who] of limits) {
      const wait = limiter.take(key, now);
      if (wait > 0) {
        res.setHeader('Retry-After', String(wait));
        return reply(res, 429, { error: `too many enrollment requests from ${who}; retry in ${wait} s` });
      }
    }
    const rule = autoApproveRuleFor(autoApprove, pool, nodeName);
    const autoApproved = rule !== undefined && cache.pools.has(pool) && !cache.nodeRecords.has(nodeName);
    const limit = options.maxPendingRequests ?? MAX_PENDING_ENROLLMENT_REQUESTS;
    // Approved hosts that have not connected hold a place too: a rule's approvals are bounded
    // by the same limit, and their nodes go when the request expires.
    const queued = queuedRequests(cache, now);
    if (queued.count >= limit) {
      // A place frees up when the first request expires or is decided: a host is told to come
      // back within a minute, never locked out for hours.
      const retryAfter = Math.min(MAX_FULL_QUEUE_RETRY_AFTER_S, Math.max(1, Math.ceil((queued.firstExpiry - now) / 1000)));
      if (throttleLogs.take('queue-full', now) === 0) log.warn({ pending: limit, node: nodeName, pool, remote: address }, 'enrollment requests refused: too many requests are waiting (logged once a minute)');
      res.setHeader('Retry-After', String(retryAfter));
      return reply(res, 503, { error: `${limit} enrollment requests are already waiting (the limit: pending ones, and auto-approved hosts not yet connected); retry in ${retryAfter} s` });
    }
    let record: EnrollmentRequestRecord = {
      nodeName, pool, csr, ...(labels ? { labels: asked } : {}), requestedAt: now, address, state: 'Pending',
      // Kept while its host polls (keptAlive), up to the request TTL.
      expiresAt: now + Math.min(idleTtlMs, requestTtlMs),
    };
    // An expired request of the same key not yet collected is replaced.
    const ops: WriteOp[] = [{ type: 'put', kind: 'EnrollmentRequest', name: id, value: record, expectedVersion: existing ? existing.resourceVersion : null }];
    if (rule && autoApproved) {
      const certificate = await signer.signNode(csr, nodeName, pool, cache.nodeGeneration(nodeName));
      // The host has the certificate in this answer: a node that has not connected when the
      // request expires never will, and is deleted with it (the collector).
      record = { ...record, state: 'Approved', decidedBy: `${AUTO_APPROVED_BY}${describeRule(rule)}`, decidedAt: now, certificate, expiresAt: now + idleTtlMs };
      ops[0] = { ...ops[0]!, value: record } as WriteOp;
      ops.push({ type: 'put', kind: 'Node', name: nodeName, expectedVersion: null, value: enrolledNodeRecord(cache, pool, certificate) });
    } else if (rule && refusalLogs.take(address, now) === 0) {
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
    if (record.state === 'Approved') log.info({ id, node: nodeName, pool, remote: address, decidedBy: record.decidedBy }, 'enrollment request auto-approved');
    else log.info({ id, node: nodeName, pool, remote: address }, 'enrollment request waits for an operator (mcctl get enrollments)');
    res.setHeader('Location', `/enrollment-requests/${id}`);
    answerRequest(res, { name: id, value: record });
  };

  /**
   * A pending request its host polls lives on: its expiry moves to an idle TTL from now, up to
   * the request TTL. Written at most once per half idle TTL, so polling costs few writes.
   */
  const keptAlive = async (stored: StoredObject<EnrollmentRequestRecord>, now = Date.now()): Promise<StoredObject<EnrollmentRequestRecord>> => {
    const r = stored.value;
    const expiresAt = Math.min(now + idleTtlMs, r.requestedAt + requestTtlMs);
    if (r.state !== 'Pending' || expiresAt - r.expiresAt < idleTtlMs / 2) return stored;
    const value: EnrollmentRequestRecord = { ...r, expiresAt };
    try {
      const { revision } = await store.commit([{ type: 'put', kind: 'EnrollmentRequest', name: stored.name, value, expectedVersion: stored.resourceVersion, createdAt: stored.createdAt }]);
      await cache.waitForRevision(revision);
      return cache.enrollmentRequests.get(stored.name) ?? { ...stored, value };
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      // Decided (or kept alive by another poll) meanwhile: the stored one is the answer.
      return await store.get('EnrollmentRequest', stored.name) ?? stored;
    }
  };

  const requestStatus = async (req: IncomingMessage, res: ServerResponse, id: string): Promise<void> => {
    if (throttled(req, res, ANONYMOUS)) return;
    const stored = /^[0-9a-f]{64}$/.test(id) ? cache.enrollmentRequests.get(id) ?? await store.get('EnrollmentRequest', id) : undefined;
    // An unknown id counts as a failure: polling a guessed id is guessing.
    if (!stored || !isLive(stored.value)) return fail(req, res, ANONYMOUS, 404, `no enrollment request ${id.slice(0, 64)} (it expired, or was never made): POST /enrollment-requests again`);
    answerRequest(res, await signedIfApproved(await keptAlive(stored)));
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
      const again = await store.get('EnrollmentRequest', stored.name);
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

/**
 * Reads a JSON body of at most MAX_ENROLLMENT_BODY_BYTES. A longer one is read to its end and
 * thrown away (so the client gets its 413 instead of a reset connection), up to
 * MAX_DRAINED_BYTES; past that it is answered at once and the connection closed.
 */
function readJson(req: IncomingMessage): Promise<{ ok: true; value: unknown } | { ok: false; status: 400 | 413; error: string }> {
  const tooLarge = { ok: false as const, status: 413 as const, error: `the body is larger than ${MAX_ENROLLMENT_BODY_BYTES} bytes, the most a request to this endpoint needs (a CSR, a name and a few labels)` };
  if (Number(req.headers['content-length']) > MAX_DRAINED_BYTES) return Promise.resolve(tooLarge);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= MAX_ENROLLMENT_BODY_BYTES) chunks.push(chunk);
      else if (size > MAX_DRAINED_BYTES) {
        req.off('data', onData);
        req.pause();
        resolve(tooLarge);
      }
    };
    req.on('data', onData);
    req.once('error', (err) => resolve({ ok: false, status: 400, error: `the body could not be read: ${err.message}` }));
    // A client gone mid-body: nothing to answer, but the handler must not wait for ever (after
    // 'end' this changes nothing: the first answer stands).
    req.once('close', () => resolve({ ok: false, status: 400, error: 'the body was cut short' }));
    req.once('end', () => {
      if (size > MAX_ENROLLMENT_BODY_BYTES) return resolve(tooLarge);
      try {
        resolve({ ok: true, value: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
      } catch (err) {
        resolve({ ok: false, status: 400, error: `the body is not JSON: ${(err as Error).message}` });
      }
    });
  });
}

/**
 * Which limits a failure counts against: always the client's address; its network when the
 * request carries no valid credential; the presented token when it is not a valid one.
 */
interface Scope {
  network?: boolean;
  token?: string;
}
const ANONYMOUS: Scope = { network: true };
