// `mcctl get nodes -o wide` shows how long each node's certificate has left (CERT-EXPIRES), from
// the certificate on the node's record, through the real binary against a real server over TLS.

import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { certificateOf, recordCertificate } from '../helpers/node-certificate.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

let agent: SimulatedAgent;
const { server, conn, connectAgent } = serverFixture({}, async () => {
  // n1 registered with its real certificate (90 days: registration records it); n2 has ten hours and a half left, n3 ran
  // out an hour ago, n4 has none on record (registered before records carried it).
  agent = await connectAgent('n1', { autoDone: true, labels: { 'node-role.kubernetes.io/worker': '' } });
  const cert = certificateOf(agent.options.tls.cert);
  await recordCertificate(server, 'n2', { ...cert, notAfter: Date.now() + 10.5 * 3600_000 });
  await recordCertificate(server, 'n3', { ...cert, notAfter: Date.now() - 3600_000 });
  await recordCertificate(server, 'n4', cert);
  const { cache } = server.handle.controlPlane;
  const n4 = cache.nodeRecords.get('n4')!;
  const { certificate: _, ...bare } = n4.value;
  await cache.waitForRevision((await cache.store.commit([{ type: 'put', kind: 'Node', name: 'n4', value: bare, createdAt: n4.createdAt, expectedVersion: n4.resourceVersion }])).revision);
});

test('get nodes -o wide: CERT-EXPIRES in AGE\'s units, "expired" once past, <unknown> without a record of it', async () => {
  const wide = await runCliAsync([...conn, 'get', 'nodes', '-o', 'wide']);
  assert.equal(wide.status, 0, wide.stderr);
  // Cells are read at the header's offset: a node that never reported has empty STATE cells.
  const [head, ...lines] = wide.stdout.trimEnd().split('\n');
  const at = head!.indexOf('CERT-EXPIRES');
  assert.ok(at > 0, `CERT-EXPIRES in ${head}`);
  assert.match(head!.slice(at), /^CERT-EXPIRES\s+REASON$/, 'before REASON, the free-text column that stays last');
  const expires = Object.fromEntries(lines.map((l) => [l.split(/\s+/)[0], l.slice(at).split(/\s+/)[0]]));
  assert.deepEqual(expires, {
    // A node certificate lives 90 days (the default lifetime): AGE's units.
    n1: '89d',
    n2: '10h',
    n3: 'expired',
    n4: '<unknown>',
  });

  // Only with -o wide, as the other wide columns.
  const narrow = await runCliAsync([...conn, 'get', 'nodes']);
  assert.doesNotMatch(narrow.stdout, /CERT-EXPIRES/);
});
