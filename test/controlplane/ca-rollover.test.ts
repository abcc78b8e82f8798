// CA rollover with overlap, and the server's own certificate replaced while it runs (issue 17).
// mcctl pki ca rotate / promote / retire on a directory from mcctl pki init; the server reads
// its files again (SIGHUP's reload, or noticing the change); agents renewing on 9 s
// certificates move onto the new CA and stay connected throughout.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { connect } from '../../src/cli/client/connection.ts';
import { startServer, type ServerHandle } from '../../src/controlplane/server.ts';
import { createLogger } from '../../src/runtime/logger.ts';
import { certificateBinding, certificateValidity, issueCertificate, splitPemBundle } from '../../src/runtime/pki.ts';
import { runCli, runCliAsync } from '../helpers/run-cli.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';

// mcctl runs as a child process while the server and agents go on in this one.
// 9 s: a stream ends with its certificate, so a renewal (at 6 s) has 3 s to land even on a loaded machine.
const LIFETIME_MS = 9000;
let dir: string;
let server: ServerHandle;
let address: string;
const agents: SimulatedAgent[] = [];
const logs: string[] = [];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mcplane-rollover-'));
  const init = runCli(['pki', 'init', join(dir, 'pki'), '--node', 'roll-1', '--node', 'roll-2']);
  assert.equal(init.status, 0, init.stderr);
  dir = join(dir, 'pki');
  server = await startServer({
    dataDir: mkdtempSync(join(tmpdir(), 'mcplane-data-')), listen: '127.0.0.1:0',
    tls: { ca: join(dir, 'ca.crt'), cert: join(dir, 'server.crt'), key: join(dir, 'server.key') },
    caKeyFile: join(dir, 'ca.key'), nodeCertificateLifetimeMs: LIFETIME_MS, certificateWatchMs: 200,
    log: createLogger({ level: 'info', write: (l) => logs.push(l) }),
  });
  address = `127.0.0.1:${server.grpcPort}`;
});
after(async () => {
  if (process.env.DUMP) writeFileSync('/tmp/ct/rollover.log', logs.join(''));
  for (const a of agents) a.close();
  await server.close(500);
});

/** The certificate a new TLS handshake with the server presents. */
function handshakeCertificate(): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port: server.grpcPort, ALPNProtocols: ['h2'], ca: readFileSync(join(dir, 'ca.crt')), cert: readFileSync(join(dir, 'admin.crt')), key: readFileSync(join(dir, 'admin.key')), servername: 'localhost', rejectUnauthorized: false }, () => {
      const serial = socket.getPeerCertificate().serialNumber.toLowerCase();
      socket.destroy();
      resolve(serial);
    });
    socket.on('error', reject);
  });
}

const serialOf = (file: string): string => certificateBinding(readFileSync(join(dir, file))).serial;

test('CA rollover: rotate, promote, retire; agents renew onto the new CA and are never disconnected', async () => {
  const oldCa = readFileSync(join(dir, 'ca.crt'), 'utf8');
  // Certificates from mcctl pki node (90 days): renewed once by hand, then every 6 s.
  for (const name of ['roll-1', 'roll-2']) {
    const a = new SimulatedAgent({ address, tls: { ca: join(dir, 'ca.crt'), cert: join(dir, 'nodes', `${name}.crt`), key: join(dir, 'nodes', `${name}.key`) }, name, autoRenew: true });
    agents.push(a);
    await a.connect();
    assert.equal(a.error, undefined);
    await a.renew();
  }
  const renewedAfter = async (since: number, check: (a: SimulatedAgent) => boolean, what: string): Promise<void> => {
    for (const a of agents) await eventually(() => a.renewals.some((r) => r.at > since) && check(a), 15_000, `${a.options.name}: ${what} (failures ${JSON.stringify(a.renewalFailures.slice(0, 3))}, error ${a.error?.details})`);
  };

  const rotated = await runCliAsync(['pki', 'ca', 'rotate', dir]);
  assert.equal(rotated.status, 0, rotated.stderr);
  assert.equal(splitPemBundle(readFileSync(join(dir, 'ca.crt'), 'utf8')).length, 2);
  assert.ok(server.reloadCertificates(), 'the server read the two-CA bundle');
  let since = Date.now();
  // Agents hold the bundle with both CAs; their certificates still come from the old CA.
  await renewedAfter(since, () => true, 'renewed after rotate');
  const oldIssuer = certificateValidity(splitPemBundle(oldCa)[0]!).subject;
  for (const a of agents) assert.equal(certificateValidity(a.certificatePem).issuer, oldIssuer);

  const promoted = await runCliAsync(['pki', 'ca', 'promote', dir]);
  assert.equal(promoted.status, 0, promoted.stderr);
  assert.ok(server.reloadCertificates(), 'the server signs with the new CA');
  since = Date.now();
  await renewedAfter(since, (a) => certificateValidity(a.certificatePem).issuer !== oldIssuer, 'a certificate from the new CA');

  const serverBefore = serialOf('server.crt');
  const retired = await runCliAsync(['pki', 'ca', 'retire', dir]);
  assert.equal(retired.status, 0, retired.stderr);
  assert.equal(splitPemBundle(readFileSync(join(dir, 'ca.crt'), 'utf8')).length, 1);
  assert.notEqual(serialOf('server.crt'), serverBefore, 'server.crt issued again by the new CA');
  assert.ok(server.reloadCertificates());
  assert.equal(await handshakeCertificate(), serialOf('server.crt'), 'new handshakes see the new server certificate');
  since = Date.now();
  // Renewals still work: they need new TLS connections, verified both ways with the new CA only.
  await renewedAfter(since, () => true, 'renewed after retire');
  // The old CA is not trusted any more: its certificates do not get through the handshake.
  const stale = new SimulatedAgent({ address, tls: { ca: join(dir, 'ca.crt'), cert: join(dir, 'nodes', 'roll-2.crt'), key: join(dir, 'nodes', 'roll-2.key') }, name: 'roll-2' });
  await stale.connect().catch(() => undefined);
  stale.close();
  assert.equal(stale.pool, undefined);
  assert.ok(stale.error);
  for (const a of agents) {
    assert.equal(a.drops, 0, `${a.options.name} was disconnected: ${a.error?.details}`);
    assert.deepEqual(a.renewalFailures, []);
  }
  // The operator's reissued credentials work against the new bundle.
  const c = connect({ server: address, pkiDir: dir, config: '/dev/null' });
  try {
    const node = await call(c, c.status.getNode.bind(c.status), { name: 'roll-1' }, 'get');
    assert.ok(node.status?.connected);
  } finally {
    c.close();
  }
});

test('server.crt replaced on disk: new handshakes see it without a reload, open streams stay; a key that does not fit is refused', async () => {
  const agent = agents[0]!;
  const before = await handshakeCertificate();
  const ca = { certPem: readFileSync(join(dir, 'ca.crt'), 'utf8'), keyPem: readFileSync(join(dir, 'ca.key'), 'utf8') };
  const pair = await issueCertificate(ca, { commonName: 'mcplane-server', hosts: ['localhost', '127.0.0.1'], usage: 'server' });
  // A certificate whose key is not there yet (a copy half done): refused, the old one kept.
  writeFileSync(join(dir, 'server.crt'), pair.certPem);
  assert.equal(server.reloadCertificates(), false);
  assert.equal(await handshakeCertificate(), before);
  assert.ok(logs.some((l) => /does not fit certificate/.test(l)));
  // The key lands: the watcher notices within its interval.
  writeFileSync(join(dir, 'server.key'), pair.keyPem);
  await eventually(async () => (await handshakeCertificate()) === certificateBinding(pair.certPem).serial, 5000, 'the new server certificate served');
  assert.equal(agent.drops, 0);
  assert.equal(agent.error, undefined);
});
