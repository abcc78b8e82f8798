// First boot before any cluster exists: a host fetches Ignition from the bootstrap endpoint with
// its token, Ignition lays down the agent's config and enrollment credential, and the agent
// starts from exactly those files, enrolls, joins its pool and converges. A host with no token
// asks to join instead, and the agent waits until an operator approves it with mcctl.
// The server here runs in-process (its PKI and ports at hand); unit-hardening.test.ts runs the
// same flow against the server under its shipped, hardened systemd unit.

import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { applyIgnitionFiles, fetchIgnition } from '../../sandbox/ignition-files.ts';
import { identityOf } from '../../src/runtime/pki.ts';
import { staticTokenFor } from '../../src/controlplane/api/bootstrap-tokens.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from '../helpers/converge.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';
import { stringify } from 'yaml';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let server: TestServer;
let c: Clients;
before(async () => {
  if (skip) return;
  server = await startTestServer({ bootstrap: true });
  c = server.admin();
});
after(async () => { if (!skip) await server.close(); });

test('Ignition from the bootstrap endpoint, then enrollment, then the agent joins its pool and converges', { skip }, async () => {
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'chrony.yaml', text: readFileSync('examples/50-examplecorp-chrony.yaml', 'utf8') }], dryRun: false }, 'apply');
  const token = staticTokenFor(readFileSync(join(server.pki.dir, 'bootstrap-token'), 'utf8'), 'worker');
  const ignition = await fetchIgnition({ port: server.handle.bootstrapPort!, ca: readFileSync(join(server.pki.dir, 'ca.crt')), token }, 'worker');

  const host = new SandboxHost({ name: 'first-boot', server: server.address, pki: server.pki });
  const written = applyIgnitionFiles(ignition, host.root);
  assert.ok(written.includes('/etc/mcplane/agent.yaml') && written.includes('/etc/mcplane/pki/ca.crt') && written.includes('/etc/mcplane/enrollment-token'));
  assert.ok(written.includes('/etc/chrony.conf'), 'the pool config itself is laid down by Ignition too');
  assert.equal(ignition.systemd.units.find((u: any) => u.name === 'mcplane-agent.service').enabled, true);

  await host.startFromRoot();
  const target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  const node = await untilNode(c, [host], 'first-boot', (n) => n.status!.currentConfig === target && n.status!.state === 'Done', 60_000);
  assert.equal(node.pool, 'worker');
  assert.deepEqual(node.labels, { 'node-role.kubernetes.io/worker': '' }, 'labels from the served agent config');
  const cert = readFileSync(join(host.root, 'etc/mcplane/pki/node.crt'));
  assert.deepEqual(identityOf(cert), { commonName: 'first-boot', organization: 'mcplane:nodes', organizationalUnit: 'worker' });
  assert.ok(host.logs.some((l) => l.includes('enrolled: node certificate received')));
  assert.equal(host.file('etc/chrony.conf')!.split('\n').filter(Boolean).length, 3);
  await host.stop();
});

test('no token: the agent asks to join, waits for mcctl approve enrollment, then joins its pool and converges', { skip }, async () => {
  const host = new SandboxHost({ name: 'asks-to-join', server: server.address, pki: server.pki });
  // What an operator lays down on a host that has only the CA: the agent config asks to join.
  mkdirSync(join(host.root, 'etc/mcplane/pki'), { recursive: true });
  writeFileSync(join(host.root, 'etc/mcplane/pki/ca.crt'), readFileSync(join(server.pki.dir, 'ca.crt')));
  writeFileSync(join(host.root, 'etc/mcplane/agent.yaml'), stringify({
    servers: [server.address],
    tls: { ca: '/etc/mcplane/pki/ca.crt', cert: '/etc/mcplane/pki/node.crt', key: '/etc/mcplane/pki/node.key' },
    enrollment: { url: `https://localhost:${server.handle.bootstrapPort}/enrollment-requests`, pool: 'worker', pollSeconds: 0.2 },
    labels: { 'node-role.kubernetes.io/worker': '', rack: 'r9' },
  }));
  await host.startFromRoot();
  const cli = (...args: string[]) => runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', ...args]);
  // The agent logs that it waits once the server has answered, which is after the request is stored.
  const waiting = () => host.logs.some((l) => l.includes('asked to join; waiting for an operator: mcctl approve enrollment asks-to-join'));
  for (const end = Date.now() + 30_000; !waiting(); await new Promise((r) => setTimeout(r, 100))) {
    assert.ok(Date.now() < end, `the agent does not say it waits\n${host.logs.slice(-10).join('\n')}`);
  }
  assert.match((await cli('get', 'enrollments')).stdout, /^\S+\s+asks-to-join\s+worker\s+Pending\s/m);
  const approved = await cli('approve', 'enrollment', 'asks-to-join');
  assert.equal(approved.status, 0, approved.stderr);

  const target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  const node = await untilNode(c, [host], 'asks-to-join', (n) => n.status!.currentConfig === target && n.status!.state === 'Done', 60_000);
  assert.equal(node.pool, 'worker');
  assert.equal(node.labels.rack, 'r9');
  assert.deepEqual(identityOf(readFileSync(join(host.root, 'etc/mcplane/pki/node.crt'))), { commonName: 'asks-to-join', organization: 'mcplane:nodes', organizationalUnit: 'worker' });
  assert.ok(host.logs.some((l) => l.includes('enrollment request approved: node certificate received')));
  await host.stop();
});
