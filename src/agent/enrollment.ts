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
  /** The longest wait a server's Retry-After is followed for. */
  maxRetryAfterMs?: number;
  /** Ends the wait (the agent is stopping). */
  signal?: AbortSignal;
  /** Told what the host waits for, each poll (the agent tells systemd, which extends its start). */
  onWaiting?: (status: string) => void;
}

interface Answer {
  status: number;
  retryAfterMs: number | undefined;
  body: { id?: string; state?: string; reason?: string; certificate?: string; error?: string };
}

export async function enrollIfNeeded(config: AgentConfig, log: Logger, options: EnrollmentOptions = {}): Promise<void> {
  if (!config.tls || existsSync(config.tls.cert)) return;
  if (!config.enrollment) {
    throw new ConfigurationError(`client certificate ${config.tls.cert} does not exist and no enrollment is configured`);
  }
  if ('tokenFile' in config.enrollment) return enrollWithToken(config, config.enrollment, log, options);
  return askToJoin(config, config.enrollment, log, options);
}

async function enrollWithToken(config: AgentConfig, enrollment: { url: string; tokenFile: string }, log: Logger, { retryMs = 5000, signal }: EnrollmentOptions): Promise<void> {
  const tls = config.tls!;
  const token = readFileSync(enrollment.tokenFile, 'utf8').trim();
  const ca = readFileSync(tls.ca);
  // Loaded only here: the X.509 library is the largest thing the agent would otherwise keep.
  const { createCertificateRequest } = await import('../runtime/pki.ts');
  const { csrPem, keyPem } = await createCertificateRequest(config.nodeName);
  for (let attempt = 1; ; attempt++) {
    let answer: Answer;
    try {
      answer = await send('POST', enrollment.url, ca, { token, nodeName: config.nodeName, csr: csrPem });
    } catch (err) {
      log.warn({ attempt, err: (err as Error).message, retryInMs: retryMs }, 'enrollment failed; retrying');
      await sleep(retryMs, undefined, { signal });
      continue;
    }
    if (answer.status === 200 && answer.body.certificate) {
      writeFileAtomic(tls.key, keyPem, { mode: 0o600 });
      writeFileAtomic(tls.cert, answer.body.certificate, { mode: 0o644 });
      log.info({ node: config.nodeName }, 'enrolled: node certificate received');
      return;
    }
    // 4xx will not get better by waiting: the token is used, expired, or the name is taken.
    const why = answer.body.error ?? `HTTP ${answer.status}`;
    if (answer.status >= 400 && answer.status < 500) throw new ConfigurationError(`enrollment refused: ${why}`);
    log.warn({ attempt, err: why, retryInMs: retryMs }, 'enrollment failed; retrying');
    await sleep(retryMs, undefined, { signal });
  }
}

async function askToJoin(config: AgentConfig, enrollment: { url: string; pool: string; pollSeconds: number }, log: Logger, options: EnrollmentOptions): Promise<void> {
  const { retryMs = 5000, pollMs = enrollment.pollSeconds * 1000, maxRetryAfterMs = 10 * 60_000, signal, onWaiting } = options;
  const tls = config.tls!;
  const ca = readFileSync(tls.ca);
  const { createCertificateRequest } = await import('../runtime/pki.ts');
  const kept = existsSync(tls.key) ? readFileSync(tls.key, 'utf8') : undefined;
  const { csrPem, keyPem } = await createCertificateRequest(config.nodeName, kept);
  if (kept === undefined) writeFileAtomic(tls.key, keyPem, { mode: 0o600 });
  const url = enrollment.url.replace(/\/+$/, '');
  const what = { node: config.nodeName, pool: enrollment.pool };
  const labels = Object.keys(config.labels).length > 0 ? { labels: config.labels } : {};
  let id: string | undefined;
  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    let answer: Answer;
    try {
      answer = id === undefined
        ? await send('POST', url, ca, { nodeName: config.nodeName, pool: enrollment.pool, csr: csrPem, ...labels })
        : await send('GET', `${url}/${id}`, ca);
    } catch (err) {
      log.warn({ ...what, attempt, err: (err as Error).message, retryInMs: retryMs }, 'cannot reach the bootstrap endpoint to ask to join; retrying');
      await sleep(retryMs, undefined, { signal });
      continue;
    }
    const { status, body } = answer;
    if (status === 200 && body.state === 'Approved' && body.certificate) {
      writeFileAtomic(tls.cert, body.certificate, { mode: 0o644 });
      log.info({ ...what, id }, 'enrollment request approved: node certificate received');
      return;
    }
    if (status === 200 && body.state === 'Denied') {
      throw new ConfigurationError(`the request of node ${config.nodeName} to join pool ${enrollment.pool} was denied: ${body.reason || 'no reason given'} (request ${id ?? body.id}; it is asked again with the same key once the decision expires)`);
    }
    if (status === 202 || (status === 200 && body.state === 'Approved')) {
      // Pending, or approved by a replica that cannot sign (the next poll is signed).
      if (id === undefined) {
        id = body.id;
        log.info({ ...what, id }, `asked to join; waiting for an operator: mcctl approve enrollment ${config.nodeName}`);
      }
      onWaiting?.(`waiting for approval to join pool ${enrollment.pool}: mcctl approve enrollment ${config.nodeName}`);
      await sleep(pollMs, undefined, { signal });
      continue;
    }
    if (status === 404 && id !== undefined) {
      log.warn({ ...what, id }, 'the enrollment request expired before a decision; asking again with the same key');
      id = undefined;
      continue;
    }
    const why = body.error ?? `HTTP ${status}`;
    if (status === 429 || status >= 500) {
      const wait = Math.min(answer.retryAfterMs ?? retryMs, maxRetryAfterMs);
      log.warn({ ...what, attempt, status, err: why, retryInMs: wait }, 'the bootstrap endpoint cannot take the enrollment request now; retrying');
      await sleep(wait, undefined, { signal });
      continue;
    }
    // 400 (a bad name or pool), 409 (this key asked under another name, or the name is taken):
    // asking again will not change the answer.
    throw new ConfigurationError(`the request of node ${config.nodeName} to join pool ${enrollment.pool} was refused: ${why}`);
  }
}

/** One JSON request to the bootstrap endpoint, trusting only the cluster's CA. */
function send(method: 'GET' | 'POST', url: string, ca: Buffer, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = request({ host: u.hostname, port: u.port, path: u.pathname, method, ca, headers: { 'content-type': 'application/json' }, timeout: 30_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { text += d; });
      res.on('end', () => {
        let json: Answer['body'] = {};
        try { json = JSON.parse(text); } catch { /* the status says enough */ }
        const retryAfter = Number(res.headers['retry-after']);
        resolve({ status: res.statusCode ?? 0, retryAfterMs: Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter * 1000 : undefined, body: json });
      });
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}
