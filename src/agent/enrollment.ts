// First start of a host without a node certificate. Two ways to get one from the bootstrap
// endpoint (src/controlplane/api/bootstrap-server.ts):
// - with a token: a host bootstrapped from Ignition has the CA and a single-use enrollment token.
//   It makes a key, sends a certificate request with the token (POST /enroll), and keeps the
//   certificate it gets back.
// - by asking, as in Flight Control: a host that has no token asks to join a pool
//   (POST /enrollment-requests) and polls its request (GET /enrollment-requests/<id>) until an
//   operator approves it (mcctl approve enrollment) or denies it, or an auto-approve rule does.
//   The request's id is the hash of the host's public key, so the key is kept on disk before
//   the request is made: an agent restarted while it waits polls the same request instead of
//   asking again as a stranger.
// Either way the agent never exits on an answer: a denial, a refusal (a used token), a certificate
// it cannot use or an endpoint that is away are logged, named in the unit's status, and asked
// about again later (Restart=on-failure would otherwise start it every 5 s for as long as the
// answer stands).

import { existsSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConfigurationError } from '../machineconfig/index.ts';
import type { Logger } from '../runtime/logger.ts';
import type { AgentConfig } from './agent-config.ts';
import { writeFileAtomic } from './durable-fs.ts';

export interface EnrollmentOptions {
  /** Wait after a failure that may pass (network, 5xx) when the server names no time. */
  retryMs?: number;
  /** Wait between polls of a request that waits for an operator (default: enrollment.pollSeconds). */
  pollMs?: number;
  /** Wait before asking again after a denial or a refusal (default 5 minutes). */
  refusedRetryMs?: number;
  /** The longest wait a server's Retry-After is followed for. */
  maxRetryAfterMs?: number;
  /** Ends the wait (the agent is stopping). */
  signal?: AbortSignal;
  /**
   * Told, before each wait, what the host waits for and how long until it next says something:
   * the agent extends systemd's start timeout by that much (EXTEND_TIMEOUT_USEC counts from now).
   */
  onWaiting?: (status: string, forMs: number) => void;
}

interface Answer {
  status: number;
  retryAfterMs: number | undefined;
  body: { id?: unknown; nodeName?: unknown; pool?: unknown; state?: unknown; reason?: unknown; certificate?: unknown; error?: unknown };
}

/** A request to the bootstrap endpoint gives up after this long. */
const REQUEST_TIMEOUT_MS = 30_000;
/** An answer longer than this is not one the endpoint gives. */
const MAX_ANSWER_BYTES = 1 << 20;
/** No wait is shorter, whatever Retry-After says: a server answering 0 must not be hammered. */
const MIN_WAIT_MS = 1000;
/** A wait as the status says it: whole seconds, at least one. */
const seconds = (ms: number): number => Math.max(1, Math.round(ms / 1000));

export async function enrollIfNeeded(config: AgentConfig, log: Logger, options: EnrollmentOptions = {}): Promise<void> {
  if (!config.tls || existsSync(config.tls.cert)) return;
  if (!config.enrollment) {
    throw new ConfigurationError(`client certificate ${config.tls.cert} does not exist and no enrollment is configured`);
  }
  if ('tokenFile' in config.enrollment) return enrollWithToken(config, config.enrollment, log, options);
  return askToJoin(config, config.enrollment, log, options);
}

async function enrollWithToken(config: AgentConfig, enrollment: { url: string; tokenFile: string }, log: Logger, options: EnrollmentOptions): Promise<void> {
  const tls = config.tls!;
  const node = config.nodeName;
  const ca = readFileSync(tls.ca);
  // Loaded only here: the X.509 library is the largest thing the agent would otherwise keep.
  const { certificateProblem, createCertificateRequest } = await import('../runtime/pki.ts');
  const { csrPem, keyPem } = await createCertificateRequest(node);
  const { wait, report, say, retryMs, refusedRetryMs, retryLater, retryIn } = waiter(options, log, { node }, `enrolling with the token in ${enrollment.tokenFile}`);
  for (;;) {
    options.signal?.throwIfAborted();
    // Read on each attempt: a used or expired token is mended by writing a new one into the file.
    let token: string;
    try {
      token = readFileSync(enrollment.tokenFile, 'utf8').trim();
    } catch (err) {
      report('error', `cannot read the enrollment token: ${(err as Error).message}; ${retryLater}`);
      await wait(refusedRetryMs, `cannot read the enrollment token ${enrollment.tokenFile}; ${retryLater}`);
      continue;
    }
    say();
    let answer: Answer;
    try {
      answer = await send('POST', enrollment.url, ca, { token, nodeName: node, csr: csrPem });
    } catch (err) {
      report('warn', 'enrollment failed; retrying', { err: (err as Error).message, retryInMs: retryMs });
      await wait(retryMs, `cannot reach ${enrollment.url}: ${(err as Error).message}; retrying`);
      continue;
    }
    const code = answer.status;
    const why = typeof answer.body.error === 'string' ? answer.body.error : `HTTP ${code}`;
    if (code === 200) {
      // The token names the pool; the certificate must still be for this key and node, by the CA.
      const problem = certificateProblem(answer.body.certificate, keyPem, ca.toString(), node);
      if (!problem) {
        writeFileAtomic(tls.key, keyPem, { mode: 0o600 });
        writeFileAtomic(tls.cert, answer.body.certificate as string, { mode: 0o644 });
        log.info({ node }, 'enrolled: node certificate received');
        return;
      }
      report('error', 'the enrolled certificate cannot be used; asking again later', { problem });
      await wait(refusedRetryMs, `the enrolled certificate cannot be used (${problem}); ${retryLater}`);
      continue;
    }
    if (code === 429 || code >= 500) {
      const ms = retryIn(answer);
      report('warn', 'enrollment failed; retrying', { status: code, err: why, retryInMs: ms });
      await wait(ms, `the endpoint cannot enroll now (${why}); retrying`);
      continue;
    }
    // 4xx: the token is used, expired or wrong, or the name is taken. Waiting alone will not
    // mend that, but a new token in the file will, without a restart (under Restart=on-failure an
    // exit here meant a start every 5 s).
    report('error', `enrollment refused: ${why}; ${retryLater} (write a new token to ${enrollment.tokenFile})`, { status: code });
    await wait(refusedRetryMs, `refused: ${why}; ${retryLater}`);
  }
}

/**
 * The waiting both ways share: `wait` names the wait in the unit's status and extends systemd's
 * start past it and the next request, `report` logs a problem once per distinct message (not once
 * per attempt), `say` extends the start over a request about to be made, and `retryIn` is how
 * long a busy endpoint's Retry-After is followed (at least a second, at most maxRetryAfterMs).
 */
function waiter(options: EnrollmentOptions, log: Logger, what: object, first: string) {
  const { signal, onWaiting, retryMs = 5000, refusedRetryMs = 5 * 60_000, maxRetryAfterMs = 10 * 60_000 } = options;
  let status = first;
  let reported = '';
  return {
    retryMs,
    refusedRetryMs,
    retryLater: `asking again in ${seconds(refusedRetryMs)} s`,
    retryIn(answer: Answer): number {
      return Math.min(Math.max(answer.retryAfterMs ?? retryMs, MIN_WAIT_MS), maxRetryAfterMs);
    },
    say(): void {
      onWaiting?.(status, 2 * REQUEST_TIMEOUT_MS + 30_000);
    },
    async wait(ms: number, now: string): Promise<void> {
      const waitMs = Math.max(ms, Math.min(MIN_WAIT_MS, options.pollMs ?? MIN_WAIT_MS));
      status = now;
      onWaiting?.(status, waitMs + REQUEST_TIMEOUT_MS + 30_000);
      await sleep(waitMs, undefined, { signal });
    },
    report(level: 'info' | 'warn' | 'error', message: string, fields: object = {}): void {
      if (reported === message) return;
      reported = message;
      log[level]({ ...what, ...fields }, message);
    },
  };
}

async function askToJoin(config: AgentConfig, enrollment: { url: string; pool: string; pollSeconds: number }, log: Logger, options: EnrollmentOptions): Promise<void> {
  const { pollMs = enrollment.pollSeconds * 1000, signal } = options;
  const tls = config.tls!;
  const node = config.nodeName;
  const { pool } = enrollment;
  const ca = readFileSync(tls.ca);
  const { certificateProblem, certificateRequestKeyId, createCertificateRequest } = await import('../runtime/pki.ts');
  const kept = existsSync(tls.key) ? readFileSync(tls.key, 'utf8') : undefined;
  let request: { csrPem: string; keyPem: string };
  try {
    request = await createCertificateRequest(node, kept);
  } catch (err) {
    throw new ConfigurationError(`${tls.key} is not a P-256 private key in PKCS#8 PEM, which a request to join is made with (${(err as Error).message}); delete it (and ${tls.cert} if it exists) to ask with a new key`);
  }
  const { csrPem, keyPem } = request;
  if (kept === undefined) writeFileAtomic(tls.key, keyPem, { mode: 0o600 });
  // The server names the request by the hash of the key: known here, so a restart polls it.
  const id = await certificateRequestKeyId(csrPem);
  const url = enrollment.url.replace(/\/+$/, '');
  const what = { node, pool, id };
  const labels = Object.keys(config.labels).length > 0 ? { labels: config.labels } : {};
  const approve = `mcctl approve enrollment ${node}`;
  const { wait, report, say, retryMs, refusedRetryMs, retryLater, retryIn } = waiter({ ...options, pollMs }, log, what, `asking to join pool ${pool}`);
  let asked = kept !== undefined; // a kept key may have a request standing: look before asking
  for (;;) {
    signal?.throwIfAborted();
    // Covers this request (and a second one, after a 404), whatever the last wait covered.
    say();
    let answer: Answer;
    try {
      answer = asked ? await send('GET', `${url}/${id}`, ca) : await send('POST', url, ca, { nodeName: node, pool, csr: csrPem, ...labels });
    } catch (err) {
      report('warn', 'cannot reach the bootstrap endpoint to ask to join; retrying', { err: (err as Error).message, retryInMs: retryMs });
      await wait(retryMs, `cannot reach ${url}: ${(err as Error).message}; retrying`);
      continue;
    }
    const { body } = answer;
    const code = answer.status;
    const why = typeof body.error === 'string' ? body.error : `HTTP ${code}`;
    if (code === 404 && asked) {
      // Never made, or expired before a decision: asked (again) with the same key.
      asked = false;
      continue;
    }
    if ((code === 200 || code === 202) && body.id !== undefined && body.id !== id) {
      report('error', 'the bootstrap endpoint answered about another request; asking again later', { answered: String(body.id).slice(0, 64) });
      await wait(refusedRetryMs, `the endpoint answered about another request; ${retryLater}`);
      continue;
    }
    if ((code === 200 || code === 202) && (body.nodeName !== node || body.pool !== pool)) {
      // This key's request stands under another name or pool (the config changed since it asked).
      const standing = `this key already asked to join as ${String(body.nodeName)} in pool ${String(body.pool)}`;
      report('error', `the request to join pool ${pool} was refused: ${standing}; asking again later`);
      await wait(refusedRetryMs, `refused: ${standing}; ${retryLater} (delete ${tls.key} to ask with a new key)`);
      continue;
    }
    asked ||= code === 200 || code === 202;
    if (code === 200 && body.state === 'Approved' && body.certificate !== undefined) {
      const problem = certificateProblem(body.certificate, keyPem, ca.toString(), node, pool);
      if (!problem) {
        writeFileAtomic(tls.cert, body.certificate as string, { mode: 0o644 });
        log.info(what, 'enrollment request approved: node certificate received');
        return;
      }
      report('error', 'the approved certificate cannot be used; asking again later', { problem });
      await wait(refusedRetryMs, `the approved certificate cannot be used (${problem}); ${retryLater}`);
      continue;
    }
    if (code === 200 && body.state === 'Denied') {
      const reason = typeof body.reason === 'string' && body.reason ? body.reason : 'no reason given';
      report('error', `the request to join pool ${pool} was denied: ${reason}; asked again once the decision expires (delete ${tls.key} to ask as a new host)`);
      await wait(Math.max(pollMs, refusedRetryMs), `denied: ${reason}`);
      continue;
    }
    if (code === 202 || (code === 200 && body.state === 'Approved')) {
      // Pending, or approved by a replica that cannot sign (the next poll is signed).
      report('info', `asked to join; waiting for an operator: ${approve}`);
      await wait(pollMs, `waiting for approval to join pool ${pool}: ${approve}`);
      continue;
    }
    if (code === 429 || code >= 500) {
      const ms = retryIn(answer);
      report('warn', 'the bootstrap endpoint cannot take the request to join now; retrying', { status: code, err: why, retryInMs: ms });
      await wait(ms, `the endpoint cannot take the request now (${why}); retrying`);
      continue;
    }
    // 400 (a name or pool the server refuses), 409 (this key asked under another name, or the
    // name is taken): asked again later, in case what stands in the way is gone by then.
    report('error', `the request to join pool ${pool} was refused: ${why}; asking again later`, { status: code });
    asked = false;
    await wait(refusedRetryMs, `refused: ${why}; ${retryLater}`);
  }
}

/** One JSON request to the bootstrap endpoint, trusting only the cluster's CA. */
function send(method: 'GET' | 'POST', url: string, ca: Buffer, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    // The URL object itself: an IPv6 literal's brackets are the URL's, not the host name's.
    const req = request(new URL(url), { method, ca, headers: { 'content-type': 'application/json' }, timeout: REQUEST_TIMEOUT_MS }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        text += d;
        if (text.length > MAX_ANSWER_BYTES) req.destroy(new Error(`an answer of more than ${MAX_ANSWER_BYTES} bytes`));
      });
      res.on('end', () => {
        let json: unknown;
        try { json = JSON.parse(text); } catch { /* the status says enough */ }
        const retryAfter = Number(res.headers['retry-after']);
        resolve({
          status: res.statusCode ?? 0,
          retryAfterMs: res.headers['retry-after'] && Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : undefined,
          body: typeof json === 'object' && json !== null && !Array.isArray(json) ? json as Answer['body'] : {},
        });
      });
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}
