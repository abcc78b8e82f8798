// mcplane-server's flags and config file: SQLite by default, etcd with --store, the same keys in
// the file, and clear errors for what does not fit together.

import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startEtcdCluster } from '../../sandbox/etcd-cluster.ts';
import { resolveOptions } from '../../src/controlplane/main.ts';
import { ConfigurationError } from '../../src/machineconfig/index.ts';
import { createCertificateAuthority, issueCertificate, REPLICA_CN_PREFIX, ROLE_REPLICA } from '../../src/runtime/pki.ts';
import { spawnServer } from '../helpers/server-process.ts';
import { testPki } from '../helpers/test-pki.ts';

const dir = mkdtempSync(join(tmpdir(), 'mcplane-opts-'));
const file = (name: string, text: string): string => {
  writeFileSync(join(dir, name), text);
  return join(dir, name);
};

test('without --store the server runs on SQLite in its data dir (/var/lib/mcplane-server by default)', () => {
  const o = resolveOptions({ insecure: true, listen: '127.0.0.1:0' });
  assert.equal(o.etcd, undefined);
  assert.equal(o.dataDir, '/var/lib/mcplane-server');
});

test('--store etcd://a,b,c with TLS files and a replica name; the config file takes the same keys', async () => {
  const pki = await testPki();
  const replica = await issueCertificate(pki.ca, { commonName: `${REPLICA_CN_PREFIX}cp-1`, organization: ROLE_REPLICA, usage: 'client' });
  const ca = file('ca.crt', 'CA');
  const cert = file('client.crt', replica.certPem);
  const key = file('client.key', 'KEY');
  const flags = resolveOptions({ store: 'etcd://10.0.0.1:2379,10.0.0.2:2379,[::1]:2379', etcdCa: ca, etcdCert: cert, etcdKey: key, replicaName: 'cp-1', etcdPrefix: '/fleet-a/' });
  assert.deepEqual(flags.etcd?.endpoints, ['10.0.0.1:2379', '10.0.0.2:2379', '[::1]:2379']);
  assert.equal(flags.etcd?.prefix, '/fleet-a/');
  assert.equal(flags.etcd?.tls?.cert.toString(), replica.certPem);
  assert.equal(flags.replicaName, 'cp-1');
  const config = file('server.yaml', `store: etcd://10.0.0.1:2379\netcdCa: ${ca}\netcdCert: ${cert}\netcdKey: ${key}\nreplicaName: cp-2\n`);
  const fromFile = resolveOptions({ config });
  assert.deepEqual(fromFile.etcd?.endpoints, ['10.0.0.1:2379']);
  assert.equal(fromFile.replicaName, 'cp-2');
  assert.equal(resolveOptions({ config, replicaName: 'flag-wins' }).replicaName, 'flag-wins');
});

test('a malformed --store, or TLS files without it, or only some of them, are errors that say what to write', () => {
  assert.throws(() => resolveOptions({ store: 'http://10.0.0.1:2379' }), (e: Error) => e instanceof ConfigurationError && /expected etcd:\/\/HOST:PORT/.test(e.message));
  assert.throws(() => resolveOptions({ store: 'etcd://10.0.0.1' }), /not HOST:PORT: 10\.0\.0\.1/);
  assert.throws(() => resolveOptions({ etcdCa: '/x' }), /need --store etcd:\/\//);
  assert.throws(() => resolveOptions({ store: 'etcd://h:1', etcdCa: file('only-ca', 'x') }), /go together/);
  assert.throws(() => resolveOptions({ store: 'etcd://h:1', etcdCa: '/missing/ca', etcdCert: '/missing/c', etcdKey: '/missing/k' }), /--etcd-ca \/missing\/ca: ENOENT/);
});

test('--etcd-cert must be a replica certificate: node, operator and other mcplane-CA certificates are refused at start-up', async () => {
  const pki = await testPki();
  const etcdFlags = (cert: string) => ({ store: 'etcd://10.0.0.1:2379', etcdCa: join(pki.dir, 'ca.crt'), etcdCert: cert, etcdKey: file('any.key', 'KEY'), pkiDir: pki.dir });
  const node = await pki.node('worker-1');
  assert.throws(() => resolveOptions(etcdFlags(node.cert)), (e: Error) => e instanceof ConfigurationError &&
    e.message.includes(`--etcd-cert ${node.cert} (CN=worker-1, O=mcplane:nodes) is a node certificate`) && /mcctl pki replica NAME/.test(e.message));
  assert.throws(() => resolveOptions(etcdFlags(join(pki.dir, 'admin.crt'))), /\(CN=admin, O=mcplane:admins\) is an operator certificate/);
  // The server's own certificate, or any other one mcplane's CA made, is not a replica's.
  assert.throws(() => resolveOptions(etcdFlags(join(pki.dir, 'server.crt'))), /\(CN=mcplane-server\) was issued by mcplane's CA .* but is not a replica certificate/);
  const badCn = await issueCertificate(pki.ca, { commonName: 'cp-1', organization: ROLE_REPLICA, usage: 'client' });
  assert.throws(() => resolveOptions(etcdFlags(file('bad-cn.crt', badCn.certPem))), /a replica certificate's CN must be mcplane-replica@NAME/);
  assert.throws(() => resolveOptions(etcdFlags(file('garbage.crt', 'CERT'))), /--etcd-cert .*garbage.crt: not a PEM certificate/);
  // A certificate from etcd's own CA is etcd's business: mcplane's nodes cannot have one.
  const etcdCa = await createCertificateAuthority('etcd CA');
  const own = await issueCertificate(etcdCa, { commonName: 'mcplane', usage: 'client' });
  assert.equal(resolveOptions(etcdFlags(file('etcd-own.crt', own.certPem))).etcd?.tls?.cert.toString(), own.certPem);
  const replica = await issueCertificate(pki.ca, { commonName: `${REPLICA_CN_PREFIX}cp-1`, organization: ROLE_REPLICA, usage: 'client' });
  assert.ok(resolveOptions(etcdFlags(file('replica.crt', replica.certPem))).etcd?.tls);
});

test('--etcd-allow-plaintext and its config key etcdAllowPlaintext reach the store; without --store it is an error', () => {
  assert.equal(resolveOptions({ store: 'etcd://10.0.0.1:2379', etcdAllowPlaintext: true }).etcd?.allowPlaintext, true);
  assert.equal(resolveOptions({ store: 'etcd://10.0.0.1:2379' }).etcd?.allowPlaintext, undefined);
  assert.equal(resolveOptions({ config: file('plain.yaml', 'store: etcd://10.0.0.1:2379\netcdAllowPlaintext: true\n') }).etcd?.allowPlaintext, true);
  assert.throws(() => resolveOptions({ etcdAllowPlaintext: true }), /--etcd-allow-plaintext needs --store/);
});

/** This machine's own address off loopback, for an etcd that is reachable but not local-only. */
const ownAddress = Object.values(networkInterfaces()).flat().find((a) => a && a.family === 'IPv4' && !a.internal)?.address;

test('plaintext etcd off loopback: the server refuses it naming --etcd-allow-plaintext; with the flag it runs and warns', { skip: ownAddress ? false : 'no non-loopback IPv4 address here' }, async () => {
  const etcd = await startEtcdCluster({ members: 1, clientHost: ownAddress! });
  const args = ['--store', `etcd://${etcd.endpoints[0]}`, '--insecure', '--listen', '127.0.0.1:0', '--no-bootstrap', '--data-dir', mkdtempSync(join(dir, 'data-'))];
  try {
    await assert.rejects(spawnServer(args), (err: Error) => {
      assert.match(err.message, /server exited with 1/);
      assert.ok(err.message.includes(`plaintext (no --etcd-ca, --etcd-cert, --etcd-key) to ${etcd.endpoints[0]}, which is not loopback`), err.message);
      assert.match(err.message, /--etcd-allow-plaintext \(config key etcdAllowPlaintext: true\)/);
      return true;
    });
    const server = await spawnServer([...args, '--etcd-allow-plaintext']);
    try {
      const warn = server.logs.find((l) => l.includes('etcd over plaintext off loopback'));
      assert.ok(warn, server.logs.join('\n'));
      // At warn, behind the syslog priority the logger prefixes for journald.
      assert.equal(JSON.parse(warn.replace(/^<\d>/, '')).level, 'warn');
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  } finally {
    await etcd.stop();
  }
});

test('--lease-ttl sets the replica lease in whole seconds (tests shorten failover with it); the file takes leaseTtl', () => {
  assert.equal(resolveOptions({}).leaseTtlMs, undefined);
  assert.equal(resolveOptions({ leaseTtl: '2' }).leaseTtlMs, 2000);
  assert.equal(resolveOptions({ config: file('lease.yaml', 'leaseTtl: 3\n') }).leaseTtlMs, 3000);
  for (const bad of ['0', '1.5', 'soon', '301']) {
    assert.throws(() => resolveOptions({ leaseTtl: bad }), (e: Error) => e instanceof ConfigurationError && e.message === `--lease-ttl ${bad}: expected whole seconds from 1 to 300`);
  }
});
