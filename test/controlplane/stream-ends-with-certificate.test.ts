// An agent's stream lives no longer than the certificate it was opened with (issue 31, holes 4
// and 5): it ends when the certificate expires, and when the CA that issued it leaves the
// server's trust bundle (mcctl pki ca retire, then a reload). Before, TLS checked the
// certificate at the handshake only: an open stream went on receiving configs past its
// certificate's end, and renewing on it handed out a fresh certificate, so a rollover made
// because the old CA's key leaked did not cut off what that key had signed.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { startServer, type ServerHandle } from '../../src/controlplane/server.ts';
import { createLogger } from '../../src/runtime/logger.ts';
import { runCli, runCliAsync } from '../helpers/run-cli.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const agents: SimulatedAgent[] = [];
const closers: (() => Promise<void>)[] = [];
after(async () => {
  for (const a of agents) a.close();
  for (const close of closers) await close();
});

test('a stream ends when its certificate expires, and a renewal asked on it after that is never answered with a certificate', async () => {
  const lifetimeMs = 4000;
  const server: TestServer = await startTestServer({ signing: true, nodeCertificateLifetimeMs: lifetimeMs });
  closers.push(() => server.close());
  const files = await server.pki.shortLivedNode('expiring-1', lifetimeMs);
  // No autoRenew: the agent keeps the stream it opened, as one that cannot renew would.
  const a = new SimulatedAgent({ address: server.address, tls: files, name: 'expiring-1', autoDone: true });
  agents.push(a);
  await a.connect();
  assert.ok(!a.error, a.error?.details);
  await a.waitFor(() => a.ended, lifetimeMs + 10_000);
  const ended = a.error as SimulatedAgent['error'];
  assert.equal(ended?.code, Status.PERMISSION_DENIED);
  assert.match(ended!.details, /the certificate of node expiring-1 \(serial [0-9a-f]+\) expired at /);
  // The stream is gone: nothing can be renewed on it.
  await assert.rejects(a.requestCertificate(), /not connected/);
  const node = server.handle.controlPlane.cache.nodeRecords.get('expiring-1');
  assert.ok(node?.value.certificate && node.value.certificate.notAfter <= Date.now(), 'no newer certificate was issued for it');
});

test('mcctl pki ca retire ends the streams of certificates the retired CA signed; those of the new CA stay', async () => {
  const base = mkdtempSync(join(tmpdir(), 'mcplane-retire-'));
  const dir = join(base, 'pki');
  const init = runCli(['pki', 'init', dir, '--node', 'old-ca-1', '--node', 'new-ca-1']);
  assert.equal(init.status, 0, init.stderr);
  const server: ServerHandle = await startServer({
    dataDir: mkdtempSync(join(tmpdir(), 'mcplane-data-')), listen: '127.0.0.1:0',
    tls: { ca: join(dir, 'ca.crt'), cert: join(dir, 'server.crt'), key: join(dir, 'server.key') },
    caKeyFile: join(dir, 'ca.key'), certificateWatchMs: 60_000,
    log: createLogger({ level: 'silent' }),
  });
  closers.push(() => server.close(500));
  const address = `127.0.0.1:${server.grpcPort}`;
  const nodeFiles = (name: string) => ({ ca: join(dir, 'ca.crt'), cert: join(dir, 'nodes', `${name}.crt`), key: join(dir, 'nodes', `${name}.key`) });
  const stays = new SimulatedAgent({ address, tls: nodeFiles('new-ca-1'), name: 'new-ca-1' });
  const cut = new SimulatedAgent({ address, tls: nodeFiles('old-ca-1'), name: 'old-ca-1' });
  agents.push(stays, cut);
  await cut.connect();
  await stays.connect();

  for (const step of ['rotate', 'promote']) {
    const r = await runCliAsync(['pki', 'ca', step, dir]);
    assert.equal(r.status, 0, r.stderr);
    server.reloadCertificates();
  }
  // One agent moves onto the new CA (a renewal after promote); the other keeps its CA1 stream.
  await stays.renew();
  assert.equal(cut.ended, false, 'both CAs are trusted until the retire');

  const retired = await runCliAsync(['pki', 'ca', 'retire', dir]);
  assert.equal(retired.status, 0, retired.stderr);
  assert.ok(server.reloadCertificates());
  await cut.waitFor(() => cut.ended, 5000);
  assert.equal(cut.error?.code, Status.PERMISSION_DENIED);
  assert.match(cut.error!.details, /the CA that issued the certificate of node old-ca-1 \(serial [0-9a-f]+\) is no longer trusted/);
  assert.equal(stays.ended, false, 'the stream of a certificate from the new CA stays open');
  assert.equal(stays.drops, 0);
});
