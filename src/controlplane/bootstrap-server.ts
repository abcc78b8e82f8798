// The bootstrap endpoint, mcplane's Machine Config Server (default port 22623), for hosts that
// have nothing yet but an Ignition pointer config:
//
//   GET  /config/<pool>  with "Authorization: Bearer <bootstrap token>": the pool's rendered
//        config as Ignition (3.x as the Accept header asks, or 2.2), plus what the host needs to
//        join: /etc/mcplane/agent.yaml, the CA certificate and a single-use enrollment token.
//   POST /enroll         {token, nodeName, csr}: signs the host's key as O=mcplane:nodes,CN=<name>.
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
import { ConflictError, encodeDataUrl, labelsForPool, toIgnitionV2, type IgnitionConfig, type IgnitionFile, type MachineConfigPool } from '../machineconfig/index.ts';
import type { Logger } from '../runtime/logger.ts';
import { certificateBinding, RESERVED_NODE_NAMES, ROLE_NODE, signCertificateRequest, type KeyPairPem } from '../runtime/pki.ts';
import { bootstrapTokenPool, type StaticBootstrapToken } from './bootstrap-tokens.ts';
import type { ControlPlane } from './control-plane.ts';
import { RateLimiter, type RateLimit } from './rate-limiter.ts';
import type { EnrollmentTokenRecord, NodeRecordValue } from './stored-records.ts';

export const DEFAULT_BOOTSTRAP_PORT = 22623;
export const ENROLLMENT_TOKEN_TTL_MS = 24 * 3600_000;
const MAX_BODY_BYTES = 64 * 1024;
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
   * address and per presented token before answering 429 (default: 10 at once, then 10 a minute).
   */
  failureRate?: RateLimit;
  /** This endpoint's address as hosts reach it (host:port), for the enrollment URL; by default
   * the address it listens on, with the port it got and the hostname for a wildcard address. */
  bootstrapAddress?: string;
}

/** An address as others can reach it: a wildcard listen address becomes this machine's name. */
export function reachableAddress(host: string, port: number): string {
  const h = host.replace(/^\[|\]$/g, '');
  const name = h === '0.0.0.0' || h === '::' || h === '' ? hostname() : host;
  return `${name}:${port}`;
}

export function startBootstrapServer(cp: ControlPlane, options: BootstrapOptions, host: string, port: number, log: Logger): Promise<Server> {
  // Each config served issues an enrollment token (a store write): bound what one client can
  // make the store hold, even with the bootstrap token.
  const issuing = new RateLimiter(options.issueRate ?? { burst: 20, perMinute: 20 });
  // Guessing tokens costs attempts: per address, and per token for guesses spread over many
  // addresses. Refusals are logged within a budget too, so a flood cannot flood the journal.
  const failureRate = options.failureRate ?? { burst: 10, perMinute: 10 };
  const failures = new RateLimiter(failureRate);
  // Failures are bounded by the limiter above; its own 429s are logged once a minute per address.
  const throttleLogs = new RateLimiter({ burst: 1, perMinute: 1 });
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
    if (throttled(req, res, undefined)) return;
    fail(req, res, undefined, 404, `no such endpoint: ${req.method} ${url.pathname} (GET /config/<pool>, POST /enroll)`);
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
    const tokenPool = bootstrapTokenPool(presented, options.staticTokens, cp.cache);
    if (tokenPool === undefined) return fail(req, res, presented, 403, 'the bootstrap token is not valid (unknown, deleted or expired)');
    if (tokenPool !== poolName) {
      // A token is scoped to its pool: a worker's token (in every worker's pointer config)
      // must not yield another pool's secrets, nor an enrollment token for it.
      return fail(req, res, presented, 403, `this bootstrap token serves pool ${tokenPool} only; it cannot fetch MachineConfigPool/${poolName}'s config`);
    }
    const stored = cp.cache.pools.get(poolName);
    if (!stored) return reply(res, 404, { error: `MachineConfigPool/${poolName} does not exist` });
    const target = cp.cache.poolTarget(poolName);
    const rendered = target ? cp.cache.renderedConfig(target) : undefined;
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
    await cp.store.commit([{
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
    const stored = await cp.store.get<EnrollmentTokenRecord>('EnrollmentToken', hashToken(token));
    if (!stored) return fail(req, res, token, 403, 'the enrollment token is not valid');
    if (stored.value.usedBy) return fail(req, res, token, 403, `the enrollment token was already used by node ${stored.value.usedBy}`);
    if (stored.value.expiresAt < Date.now()) return fail(req, res, token, 403, 'the enrollment token has expired; fetch the Ignition config again');
    const taken = (): void => reply(res, 409, { error: `Node/${nodeName} is already registered; a new host cannot take its identity (delete the node first: mcctl delete node ${nodeName})` });
    if (cp.cache.nodeRecords.has(nodeName)) return taken();
    let certificate: string;
    try {
      // The certificate binds the node to the pool it enrolled for (OU): it joins that role and
      // cannot claim another, whatever its agent.yaml says.
      certificate = await signCertificateRequest(options.ca, csr, { commonName: nodeName, organization: ROLE_NODE, organizationalUnit: stored.value.pool, usage: 'client' });
    } catch (err) {
      return fail(req, res, token, 400, `the certificate request is not valid: ${(err as Error).message}`);
    }
    // One commit spends the token and reserves the name, on whichever replica: two hosts
    // enrolling as one name, or one token used twice, get one certificate between them.
    try {
      await cp.store.commit([
        { type: 'put', kind: 'EnrollmentToken', name: stored.name, expectedVersion: stored.resourceVersion, value: { ...stored.value, usedBy: nodeName, usedAt: Date.now() } satisfies EnrollmentTokenRecord },
        // Bound to this certificate from the start: no other certificate for the name (an older
        // host's, say) is accepted for this node.
        { type: 'put', kind: 'Node', name: nodeName, expectedVersion: null, value: { labels: labelsForPool(cp.cache.pools.get(stored.value.pool)?.value, stored.value.pool), enrolledFor: stored.value.pool, registered: false, certificate: certificateBinding(certificate) } satisfies NodeRecordValue },
      ]);
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      if (err.kind === 'Node') return taken();
      return reply(res, 403, { error: 'the enrollment token was already used' });
    }
    log.info({ node: nodeName, pool: stored.value.pool }, 'node enrolled');
    reply(res, 200, { certificate, ca: options.ca.certPem });
  };

  /** Where a new host's agent connects: every replica, so it can move when one is lost. */
  const agentServers = (): string[] => {
    if (options.grpcAddress) return options.grpcAddress.split(',').map((a) => a.trim()).filter(Boolean);
    const self = cp.replica.options.address;
    const others = [...cp.cache.replicas.values()].map((r) => r.value.address).filter((a) => a && a !== self).sort();
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
    storage: { files: [...config.storage.files.filter((f) => !extraPaths.has(f.path)), ...extras] },
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
