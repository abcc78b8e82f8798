// A replica's identity towards etcd, on a real etcd that trusts mcplane's CA for client
// certificates (--client-cert-auth --trusted-ca-file=ca.crt) with its auth on: a role with
// read-write on /mcplane/ only, granted only to the users named like replica certificates'
// CNs (mcctl pki replica NAME -> CN=mcplane-replica@NAME). A node certificate from the same CA is
// refused twice: by mcplane-server at start-up, and by etcd itself when used directly.

import assert from 'node:assert/strict';
import { status, type ServiceError } from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startEtcdCluster, type EtcdCluster } from '../../sandbox/etcd-cluster.ts';
import { EtcdConnection } from '../../src/controlplane/store/etcd-connection.ts';
import { EtcdStore } from '../../src/controlplane/store/etcd-store.ts';
import { createLogger } from '../../src/runtime/logger.ts';
import { createCertificateRequest, REPLICA_CN_PREFIX, ROLE_REPLICA, identityOf } from '../../src/runtime/pki.ts';
import { startReplicaSet, type ReplicaSet } from '../helpers/replica-set.ts';
import { runCli } from '../helpers/run-cli.ts';
import { spawnServer } from '../helpers/server-process.ts';
import { startTestServer } from '../helpers/test-server.ts';
import { testPki, type TestPki } from '../helpers/test-pki.ts';

let pki: TestPki;
let etcd: EtcdCluster;
const sets: ReplicaSet[] = [];

/** The files `mcctl pki replica NAME` writes, made through the CLI binary. */
function replicaCert(name: string): { cert: string; key: string } {
  const r = runCli(['pki', 'replica', name, '--pki-dir', pki.dir]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`CN=${REPLICA_CN_PREFIX}${name}`));
  return { cert: join(pki.dir, 'replicas', `${name}.crt`), key: join(pki.dir, 'replicas', `${name}.key`) };
}

const storeArgs = (files: { cert: string; key: string }): string[] => [
  '--store', `etcd://${etcd.endpoints.join(',')}`, '--etcd-ca', join(pki.dir, 'ca.crt'), '--etcd-cert', files.cert, '--etcd-key', files.key,
];

before(async () => {
  pki = await testPki();
  // The helper itself is etcd's root (CN=root), to set up the users and compact.
  const root = await pki.client('etcd-root', 'root', 'etcd-operators');
  etcd = await startEtcdCluster({ members: 1, tls: { ca: root.ca, server: { cert: join(pki.dir, 'server.crt'), key: join(pki.dir, 'server.key') }, client: root } });
  await etcd.enableAuth({ role: 'mcplane', prefix: '/mcplane/', users: [`${REPLICA_CN_PREFIX}cp-0`, `${REPLICA_CN_PREFIX}cp-1`] });
});
after(async () => {
  for (const s of sets) await s.stop();
  await etcd?.stop();
});

test('mcctl pki replica NAME issues O=mcplane:replicas, CN=mcplane-replica@NAME signed by the CA', () => {
  const files = replicaCert('cp-0');
  const id = identityOf(readFileSync(files.cert));
  assert.equal(id.organization, ROLE_REPLICA);
  assert.equal(id.commonName, `${REPLICA_CN_PREFIX}cp-0`);
  const bad = runCli(['pki', 'replica', 'Bad:Name', '--pki-dir', pki.dir]);
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /replica name "Bad:Name" must be/);
});

test('a replica given a node certificate for etcd refuses to start, naming the file and mcctl pki replica', async () => {
  const node = await pki.node('worker-7');
  const refused = (err: Error): boolean => {
    assert.match(err.message, /server exited with 1/);
    assert.ok(err.message.includes(`--etcd-cert ${node.cert} (CN=worker-7, O=mcplane:nodes) is a node certificate`), err.message);
    assert.match(err.message, /mcctl pki replica NAME --pki-dir DIR/);
    return true;
  };
  const args = ['--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap', '--replica-name', 'imposter'];
  await assert.rejects(spawnServer([...storeArgs(node), ...args]), refused);
  // The set-up of the report: etcd trusts mcplane's CA but has no auth, so it takes the node
  // certificate; such a replica used to start and lead. mcplane-server is the one to refuse.
  const root = await pki.client('etcd-root', 'root', 'etcd-operators');
  const open = await startEtcdCluster({ members: 1, tls: { ca: root.ca, server: { cert: join(pki.dir, 'server.crt'), key: join(pki.dir, 'server.key') }, client: root } });
  try {
    await assert.rejects(spawnServer(['--store', `etcd://${open.endpoints[0]}`, '--etcd-ca', node.ca, '--etcd-cert', node.cert, '--etcd-key', node.key, ...args]), refused);
  } finally {
    await open.stop();
  }
  // An operator's certificate is not a replica's either.
  await assert.rejects(
    spawnServer([...storeArgs({ cert: join(pki.dir, 'admin.crt'), key: join(pki.dir, 'admin.key') }), '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap']),
    /\(CN=admin, O=mcplane:admins\) is an operator certificate/,
  );
});

test('etcd itself refuses a node certificate of the same CA: its CN is no etcd user', async () => {
  const node = await pki.node('worker-7');
  const tls = { ca: readFileSync(node.ca), cert: readFileSync(node.cert), key: readFileSync(node.key) };
  // As a stolen node credential would be used: straight at etcd, not through mcplane-server.
  const connection = new EtcdConnection(etcd.endpoints, tls, 5_000);
  try {
    for (const [method, request] of [
      ['Range', { key: Buffer.from('/mcplane/'), range_end: Buffer.from('/mcplane0') }],
      ['Txn', { compare: [], success: [{ request_put: { key: Buffer.from('/mcplane/Lease/leader'), value: Buffer.from('worker-7') } }], failure: [] }],
    ] as const) {
      await assert.rejects(connection.unary('KV', method, request, method), (err: ServiceError) => {
        assert.equal(err.code, status.PERMISSION_DENIED, `${method}: ${err.message}`);
        return true;
      });
    }
  } finally {
    connection.close();
  }
  // The store names what to fix when etcd says no.
  const store = await EtcdStore.connect({ endpoints: etcd.endpoints, tls, log: createLogger({ name: 'test', level: 'error' }) });
  try {
    await assert.rejects(store.commit([{ type: 'put', kind: 'Node', name: 'x', expectedVersion: null, value: {} }]), /PERMISSION_DENIED.*the CN of this replica's --etcd-cert is its etcd user/);
  } finally {
    await store.close();
  }
});

test('a replica certificate whose CN etcd has no user for is refused by etcd; the replica says why', async () => {
  const rogue = replicaCert('rogue');
  await assert.rejects(
    spawnServer([...storeArgs(rogue), '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap']),
    /PERMISSION_DENIED/,
  );
});

test('replicas with replica certificates (mcctl pki replica) run on that etcd and one leads', async () => {
  const files = [replicaCert('cp-0'), replicaCert('cp-1')];
  const set = await startReplicaSet({ endpoints: etcd.endpoints, count: 2, pkiDir: pki.dir, argsFor: (i) => storeArgs(files[i]!) });
  sets.push(set);
  const leader = await set.waitForLeader(10_000);
  assert.equal(leader, 0);
  // The follower fails over: kill the leader, cp-1 takes over through etcd with its own user.
  await set.kill(0);
  assert.equal(await set.waitForLeader(15_000, 0), 1);
});

test('no node can be named root (etcd\'s administrator, which its certificate\'s CN would map to): mcctl pki node and enrollment refuse it', async () => {
  const cli = runCli(['pki', 'node', 'root', '--pki-dir', pki.dir]);
  assert.notEqual(cli.status, 0);
  assert.match(cli.stderr, /node name "root" is reserved: it is etcd's administrator user/);
  const server = await startTestServer({ bootstrap: {} });
  try {
    const post = (path: string, body: unknown, token?: string): Promise<{ status: number; body: any }> => new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: server.handle.bootstrapPort, path, method: body === undefined ? 'GET' : 'POST', ca: readFileSync(join(server.pki.dir, 'ca.crt')), servername: 'localhost', headers: token ? { authorization: `Bearer ${token}` } : {} }, (res) => {
        let text = '';
        res.on('data', (d) => { text += d; });
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      });
      req.on('error', reject);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });
    const ignition = await post('/config/worker', undefined, 'test-bootstrap-token');
    assert.equal(ignition.status, 200);
    const file = ignition.body.storage.files.find((f: any) => f.path === '/etc/mcplane/enrollment-token');
    const token = Buffer.from(file.contents.source.split(',')[1], 'base64').toString('utf8');
    const { csrPem } = await createCertificateRequest('root');
    const res = await post('/enroll', { token, nodeName: 'root', csr: csrPem });
    assert.equal(res.status, 400);
    assert.match(res.body.error, /nodeName "root" is reserved/);
  } finally {
    await server.close();
  }
});
