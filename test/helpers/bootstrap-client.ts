// A host's side of the bootstrap endpoint: GET /config/<pool> with a bootstrap token, and
// POST /enroll with the enrollment token the served config carries.

import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCertificateRequest } from '../../src/runtime/pki.ts';
import type { TestServer } from './test-server.ts';

export interface BootstrapResponse {
  status: number;
  headers: Record<string, unknown>;
  body: any;
}

/**
 * One request to the bootstrap endpoint. `localAddress` sends it from another loopback address
 * (127.0.0.0/8 is all this host's), as a client elsewhere would; `rawBody` sends bytes as they are.
 */
export function bootstrapFetch(server: TestServer, path: string, options: { token?: string; method?: string; body?: unknown; rawBody?: string | Buffer; localAddress?: string } = {}): Promise<BootstrapResponse> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    const req = request({ host: '127.0.0.1', port: server.handle.bootstrapPort, path, method: options.method ?? 'GET', ca: readFileSync(join(server.pki.dir, 'ca.crt')), servername: 'localhost', headers, ...(options.localAddress ? { localAddress: options.localAddress } : {}) }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text ? JSON.parse(text) : undefined }));
    });
    req.on('error', reject);
    req.end(options.rawBody ?? (options.body === undefined ? undefined : JSON.stringify(options.body)));
  });
}

/** A file's text from served Ignition. */
export function ignitionFile(ignition: any, path: string): string | undefined {
  const f = ignition.storage.files.find((x: any) => x.path === path);
  return f && Buffer.from(f.contents.source.slice(f.contents.source.indexOf(',') + 1), 'base64').toString();
}

/**
 * Does what a new host does: fetches its pool's config with `bootstrapToken`, enrolls as
 * `nodeName` with the enrollment token inside, and returns its credential files.
 */
export async function enrollHost(server: TestServer, pool: string, bootstrapToken: string, nodeName: string): Promise<{ ca: string; cert: string; key: string }> {
  const served = await bootstrapFetch(server, `/config/${pool}`, { token: bootstrapToken });
  if (served.status !== 200) throw new Error(`GET /config/${pool}: ${served.status} ${JSON.stringify(served.body)}`);
  const { csrPem, keyPem } = await createCertificateRequest(nodeName);
  const enrolled = await bootstrapFetch(server, '/enroll', { method: 'POST', body: { token: ignitionFile(served.body, '/etc/mcplane/enrollment-token'), nodeName, csr: csrPem } });
  if (enrolled.status !== 200) throw new Error(`POST /enroll: ${enrolled.status} ${JSON.stringify(enrolled.body)}`);
  const dir = mkdtempSync(join(tmpdir(), `enrolled-${nodeName}-`));
  writeFileSync(join(dir, 'node.crt'), enrolled.body.certificate);
  writeFileSync(join(dir, 'node.key'), keyPem, { mode: 0o600 });
  return { ca: join(server.pki.dir, 'ca.crt'), cert: join(dir, 'node.crt'), key: join(dir, 'node.key') };
}

/**
 * A host with no bootstrap token asking to join: POST /enrollment-requests with a CSR for a new
 * key. Returns the answer and the key (only its holder can use the certificate an approval gives).
 */
export async function requestEnrollment(server: TestServer, nodeName: string, pool: string, options: { labels?: Record<string, string>; key?: { csrPem: string; keyPem: string }; localAddress?: string } = {}): Promise<BootstrapResponse & { csrPem: string; keyPem: string }> {
  const key = options.key ?? await createCertificateRequest(nodeName);
  const res = await bootstrapFetch(server, '/enrollment-requests', { method: 'POST', body: { nodeName, pool, csr: key.csrPem, ...(options.labels ? { labels: options.labels } : {}) }, ...(options.localAddress ? { localAddress: options.localAddress } : {}) });
  return { ...res, csrPem: key.csrPem, keyPem: key.keyPem };
}

/** Writes an approved request's certificate and the host's key where an agent reads them. */
export function credentialsFrom(server: TestServer, nodeName: string, certificate: string, keyPem: string): { ca: string; cert: string; key: string } {
  const dir = mkdtempSync(join(tmpdir(), `approved-${nodeName}-`));
  writeFileSync(join(dir, 'node.crt'), certificate);
  writeFileSync(join(dir, 'node.key'), keyPem, { mode: 0o600 });
  return { ca: join(server.pki.dir, 'ca.crt'), cert: join(dir, 'node.crt'), key: join(dir, 'node.key') };
}
