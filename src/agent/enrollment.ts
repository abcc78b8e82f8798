// First start of a host bootstrapped from Ignition: it has the CA and a single-use enrollment
// token but no certificate. It makes a key, sends a certificate request with the token to the
// bootstrap endpoint, and keeps the node certificate it gets back.

import { existsSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import { ConfigurationError } from '../machineconfig/index.ts';
import type { Logger } from '../runtime/logger.ts';
import type { AgentConfig } from './agent-config.ts';
import { writeFileAtomic } from './durable-fs.ts';

export async function enrollIfNeeded(config: AgentConfig, log: Logger, retryMs = 5000): Promise<void> {
  if (!config.tls || existsSync(config.tls.cert)) return;
  if (!config.enrollment) {
    throw new ConfigurationError(`client certificate ${config.tls.cert} does not exist and no enrollment is configured`);
  }
  const token = readFileSync(config.enrollment.tokenFile, 'utf8').trim();
  const ca = readFileSync(config.tls.ca);
  // Loaded only here: the X.509 library is the largest thing the agent would otherwise keep.
  const { createCertificateRequest } = await import('../runtime/pki.ts');
  const { csrPem, keyPem } = await createCertificateRequest(config.nodeName);
  for (let attempt = 1; ; attempt++) {
    try {
      const certificate = await post(config.enrollment.url, ca, { token, nodeName: config.nodeName, csr: csrPem });
      writeFileAtomic(config.tls.key, keyPem, { mode: 0o600 });
      writeFileAtomic(config.tls.cert, certificate, { mode: 0o644 });
      log.info({ node: config.nodeName }, 'enrolled: node certificate received');
      return;
    } catch (err) {
      const e = err as Error & { status?: number };
      // 4xx will not get better by waiting: the token is used, expired, or the name is taken.
      if (e.status && e.status >= 400 && e.status < 500) throw new ConfigurationError(`enrollment refused: ${e.message}`);
      log.warn({ attempt, err: e.message, retryInMs: retryMs }, 'enrollment failed; retrying');
      await new Promise((r) => setTimeout(r, retryMs));
    }
  }
}

function post(url: string, ca: Buffer, body: unknown): Promise<string> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', ca, headers: { 'content-type': 'application/json' }, timeout: 30_000 }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        let json: { certificate?: string; error?: string } = {};
        try { json = JSON.parse(text); } catch { /* reported below */ }
        if (res.statusCode === 200 && json.certificate) return resolve(json.certificate);
        reject(Object.assign(new Error(json.error ?? `HTTP ${res.statusCode}`), { status: res.statusCode }));
      });
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}
