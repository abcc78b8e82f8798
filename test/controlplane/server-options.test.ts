// mcplane-server's flags and config file: SQLite by default, etcd with --store, the same keys in
// the file, and clear errors for what does not fit together.

import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { resolveOptions } from '../../src/controlplane/main.ts';
import { ConfigurationError } from '../../src/machineconfig/index.ts';

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

test('--store etcd://a,b,c with TLS files and a replica name; the config file takes the same keys', () => {
  const ca = file('ca.crt', 'CA');
  const cert = file('client.crt', 'CERT');
  const key = file('client.key', 'KEY');
  const flags = resolveOptions({ store: 'etcd://10.0.0.1:2379,10.0.0.2:2379,[::1]:2379', etcdCa: ca, etcdCert: cert, etcdKey: key, replicaName: 'cp-1', etcdPrefix: '/fleet-a/' });
  assert.deepEqual(flags.etcd?.endpoints, ['10.0.0.1:2379', '10.0.0.2:2379', '[::1]:2379']);
  assert.equal(flags.etcd?.prefix, '/fleet-a/');
  assert.equal(flags.etcd?.tls?.cert.toString(), 'CERT');
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

test('--lease-ttl sets the replica lease in whole seconds (tests shorten failover with it); the file takes leaseTtl', () => {
  assert.equal(resolveOptions({}).leaseTtlMs, undefined);
  assert.equal(resolveOptions({ leaseTtl: '2' }).leaseTtlMs, 2000);
  assert.equal(resolveOptions({ config: file('lease.yaml', 'leaseTtl: 3\n') }).leaseTtlMs, 3000);
  for (const bad of ['0', '1.5', 'soon', '301']) {
    assert.throws(() => resolveOptions({ leaseTtl: bad }), (e: Error) => e instanceof ConfigurationError && e.message === `--lease-ttl ${bad}: expected whole seconds from 1 to 300`);
  }
});
