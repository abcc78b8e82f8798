// mcplane-agent's side of certificate rotation, with the agent's real session code over real
// gRPC/TLS: it renews at two thirds of its certificate's life, stores key, certificate and
// trust bundle durably, and moves to a stream opened with the new certificate without ever
// being disconnected. Also: a renewal a crash interrupted is finished or dropped at start.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { recoverCertificateFiles } from '../../src/agent/certificate-store.ts';
import { AgentSession } from '../../src/agent/session.ts';
import { createLogger } from '../../src/runtime/logger.ts';
import { certificateBinding, issueCertificate, ROLE_NODE } from '../../src/runtime/pki.ts';
import { readTlsFiles } from '../../src/runtime/tls.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

// 9 s: a stream ends with its certificate, so a renewal (at 6 s) has 3 s to land even on a loaded machine.
const LIFETIME_MS = 9000;
let server: TestServer;
let c: Clients;
before(async () => {
  server = await startTestServer({ signing: true, nodeCertificateLifetimeMs: LIFETIME_MS });
  c = server.admin();
});
after(async () => {
  await server.close();
});

async function nodeFiles(name: string, validityMs = LIFETIME_MS): Promise<{ ca: string; cert: string; key: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'mcplane-agent-tls-'));
  const pair = await issueCertificate(server.pki.ca, { commonName: name, organization: ROLE_NODE, organizationalUnit: 'worker', usage: 'client', validityMs });
  const files = { ca: join(dir, 'ca.crt'), cert: join(dir, 'node.crt'), key: join(dir, 'node.key') };
  writeFileSync(files.ca, server.pki.ca.certPem);
  writeFileSync(files.cert, pair.certPem);
  writeFileSync(files.key, pair.keyPem, { mode: 0o600 });
  return files;
}

test('the agent renews several times on 9 s certificates, stores each, and its stream is never lost', async () => {
  const files = await nodeFiles('agent-rot-1');
  const lines: string[] = [];
  const log = createLogger({ level: 'info', write: (line) => lines.push(line) });
  const session = new AgentSession({
    servers: [server.address], tls: readTlsFiles(files, 'agent TLS'), tlsFiles: files, nodeName: 'agent-rot-1', labels: {},
    agentVersion: 'test', heartbeatMs: 1000, bootId: () => 'boot-1',
    status: { currentConfig: '', desiredConfig: '', state: 'Done', phase: '', reason: '', drift: [], os: null, bootId: 'boot-1', agentVersion: 'test', lastDisruption: '', currentUpdate: null, lastUpdate: null },
    onAssignment: () => {}, onForceReapply: () => {}, log,
  });
  session.start();
  try {
    await eventually(() => session.connected, 5000, 'connected');
    const failures: string[] = [];
    const deadline = Date.now() + 3 * LIFETIME_MS;
    while (Date.now() < deadline) {
      if (!session.connected) failures.push(`agent disconnected at ${Date.now()}`);
      try {
        const got = await call(c, c.status.getNode.bind(c.status), { name: 'agent-rot-1' }, 'get node');
        if (!got.status?.connected) failures.push(`server: not connected at ${Date.now()}`);
      } catch (err) {
        failures.push((err as Error).message);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(failures, []);
    assert.ok(session.renewals >= 3, `renewed ${session.renewals} times`);
    assert.equal(lines.filter((l) => /stream lost|renewal refused|renewal failed|not usable/.test(l)).length, 0, lines.join(''));
    // What is on disk is what the node is bound to, and key and certificate belong together.
    const onDisk = readTlsFiles(files, 'agent TLS');
    assert.ok(new (await import('node:crypto')).X509Certificate(onDisk.cert).checkPrivateKey((await import('node:crypto')).createPrivateKey(onDisk.key)));
    const node = await call(c, c.status.getNode.bind(c.status), { name: 'agent-rot-1' }, 'get node');
    assert.ok(node.status?.connected);
    // A renewal may be between its answer (on disk, bound) and the new stream's registration.
    const record = () => server.handle.controlPlane.cache.nodeRecords.get('agent-rot-1')!.value;
    await eventually(() => record().previousCertificate === undefined, 5000, 'the old certificate is dropped once the agent registered with the new one');
    assert.equal(record().certificate!.sha256, certificateBinding(readTlsFiles(files, 'agent TLS').cert).sha256);
    assert.ok(!existsSync(`${files.cert}.next`) && !existsSync(`${files.key}.next`));
  } finally {
    session.stop();
  }
});

test('a renewal interrupted by a crash: a complete pair is finished, half a pair dropped', async () => {
  const log = createLogger({ level: 'silent' });
  const files = await nodeFiles('agent-crash', 60_000);
  const oldCert = readFileSync(files.cert, 'utf8');
  const fresh = await issueCertificate(server.pki.ca, { commonName: 'agent-crash', organization: ROLE_NODE, usage: 'client' });
  // Crash after the key was renamed into place, before the certificate was.
  writeFileSync(files.key, fresh.keyPem);
  writeFileSync(`${files.cert}.next`, fresh.certPem);
  recoverCertificateFiles(files, log);
  assert.equal(readFileSync(files.cert, 'utf8'), fresh.certPem);
  assert.ok(!existsSync(`${files.cert}.next`));
  // Crash while the new key was written, before its certificate: the old pair stays.
  writeFileSync(`${files.key}.next`, 'half');
  recoverCertificateFiles(files, log);
  assert.ok(!existsSync(`${files.key}.next`));
  assert.equal(readFileSync(files.key, 'utf8'), fresh.keyPem);
  assert.notEqual(oldCert, fresh.certPem);
});
