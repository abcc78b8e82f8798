// mcplane_certificate_expiry_seconds over real HTTP from a real server (mTLS gRPC, real store):
// the CA and the server certificate the replica was started with, and each node's certificate
// from its stored record, as seconds left at the time of the scrape (negative once expired).

import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { recordCertificate } from '../helpers/node-certificate.ts';
import { sample, samples, scrape } from '../helpers/prometheus-text.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { serverPerTest } from '../helpers/server-fixture.ts';

const { server, agents, start: startServer } = serverPerTest();

const DAY_S = 86_400;
const secondsLeft = (notAfter: number) => (notAfter - Date.now()) / 1000;
const notAfterOf = (file: string) => Date.parse(new X509Certificate(readFileSync(file)).validTo);

test('mcplane_certificate_expiry_seconds: the CA and server certificate the replica serves with, and nodes\' certificates from their records', async () => {
  await startServer({ metrics: { listen: '127.0.0.1:0' } });
  const url = `http://127.0.0.1:${server.handle.metricsPort}/metrics`;
  const replica = server.handle.controlPlane.replica.name;

  let m = await scrape(url);
  const ca = sample(m, 'mcplane_certificate_expiry_seconds', { kind: 'ca', name: 'mcplane test CA' });
  const served = sample(m, 'mcplane_certificate_expiry_seconds', { kind: 'server', name: replica });
  assert.ok(ca !== undefined && Math.abs(ca - secondsLeft(notAfterOf(join(server.pki.dir, 'ca.crt')))) < 60, `CA: ${ca} s left`);
  assert.ok(ca > 3640 * DAY_S, 'the test CA is made for 10 years');
  assert.ok(served !== undefined && Math.abs(served - secondsLeft(notAfterOf(join(server.pki.dir, 'server.crt')))) < 60, `server: ${served} s left`);
  assert.deepEqual(samples(m, 'mcplane_certificate_expiry_seconds', { kind: 'node' }), [], 'no node has a certificate on record yet');

  // A registered node: registration binds its record to the certificate it connected with.
  const tls = await server.pki.node('node-a');
  const agent = new SimulatedAgent({ address: server.address, tls, name: 'node-a', autoDone: true });
  agents.push(agent);
  await agent.connect();
  // And a node whose certificate ran out three hours ago.
  await recordCertificate(server, 'node-old', { sha256: '00'.repeat(32), serial: '01', notAfter: Date.now() - 3 * 3600_000 });

  m = await scrape(url);
  const nodeA = sample(m, 'mcplane_certificate_expiry_seconds', { kind: 'node', name: 'node-a' });
  assert.ok(nodeA !== undefined && Math.abs(nodeA - secondsLeft(notAfterOf(tls.cert))) < 60, `node-a: ${nodeA} s left`);
  const old = sample(m, 'mcplane_certificate_expiry_seconds', { kind: 'node', name: 'node-old' });
  assert.ok(old !== undefined && old < -3 * 3600 + 60 && old > -3 * 3600 - 60, `node-old: ${old} s (expired)`);
  assert.ok(m.filter((s) => s.name === 'mcplane_certificate_expiry_seconds').every((s) => s.labels.replica === replica));

  // Computed when scraped: a second later, a second less.
  await new Promise((r) => setTimeout(r, 1100));
  const later = sample(await scrape(url), 'mcplane_certificate_expiry_seconds', { kind: 'node', name: 'node-a' })!;
  assert.ok(nodeA - later >= 1 && nodeA - later < 10, `${nodeA} then ${later}`);

  // A deleted node's series goes with its record.
  const c = server.admin();
  await call(c, c.config.delete.bind(c.config), { kind: 'Node', name: 'node-old' }, 'delete');
  await eventually(async () => samples(await scrape(url), 'mcplane_certificate_expiry_seconds', { name: 'node-old' }).length === 0, 10_000, 'node-old gone');
});
