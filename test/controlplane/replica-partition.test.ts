// A replica cut off from etcd (its only path to etcd goes through a TCP proxy the test closes)
// must stop acting as leader before its lease can expire, say NOT_SERVING on grpc.health.v1,
// and let its agents go elsewhere; another replica takes over. When the path comes back, it
// serves again, as a follower.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect as netConnect, createServer, type Server, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import * as grpcJs from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { protoPath } from 'grpc-health-check';
import { startEtcdCluster, type EtcdCluster } from '../../sandbox/etcd-cluster.ts';
import { startReplicaSet, type ReplicaSet } from '../helpers/replica-set.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { testPki, type TestPki } from '../helpers/test-pki.ts';

/** A TCP proxy that can cut every connection and refuse new ones, then come back on its port. */
class CuttableProxy {
  #server: Server | undefined;
  #sockets = new Set<Socket>();
  port = 0;

  private readonly target: { host: string; port: number };
  constructor(target: { host: string; port: number }) {
    this.target = target;
  }

  async open(): Promise<void> {
    this.#server = createServer((client) => {
      const upstream = netConnect(this.target.port, this.target.host);
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('close', () => this.#sockets.delete(s));
        s.on('error', () => { client.destroy(); upstream.destroy(); });
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => this.#server!.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.#server.address() as { port: number }).port;
  }

  async cut(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }
}

let etcd: EtcdCluster;
let set: ReplicaSet;
let pki: TestPki;
let proxy: CuttableProxy;

before(async () => {
  pki = await testPki();
  etcd = await startEtcdCluster({ members: 1 });
  const [host, port] = etcd.endpoints[0]!.split(':');
  proxy = new CuttableProxy({ host: host!, port: Number(port) });
  await proxy.open();
  // replica-0 starts first, so it leads; it reaches etcd only through the proxy.
  set = await startReplicaSet({
    endpoints: etcd.endpoints, count: 2, pkiDir: pki.dir,
    argsFor: (i) => (i === 0 ? ['--store', `etcd://127.0.0.1:${proxy.port}`] : undefined),
  });
});
after(async () => {
  await proxy?.cut();
  await set?.stop();
  await etcd?.stop();
});

function healthOf(address: string): Promise<string> {
  const health = grpcJs.loadPackageDefinition(loadSync(protoPath, { enums: String })) as any;
  const tls = { ca: readFileSync(`${pki.dir}/ca.crt`), key: readFileSync(`${pki.dir}/admin.key`), cert: readFileSync(`${pki.dir}/admin.crt`) };
  const client = new health.grpc.health.v1.Health(address, grpcJs.credentials.createSsl(tls.ca, tls.key, tls.cert));
  return new Promise<string>((resolve) => {
    client.check({ service: '' }, { deadline: Date.now() + 2000 }, (err: Error | null, res: { status: string }) => {
      client.close();
      resolve(err ? `error: ${err.message}` : res.status);
    });
  });
}

test('cut off from etcd, the leader steps down, says NOT_SERVING and sheds its agents; another replica leads', async () => {
  assert.equal(await set.leader(), 0, 'replica-0 leads at first');
  assert.equal(await healthOf(set.addresses[0]!), 'SERVING');
  const agent = new SimulatedAgent({ address: set.addresses[0]!, failover: [set.addresses[1]!], tls: await pki.node('partitioned'), name: 'partitioned', autoDone: true });
  await agent.connect();
  try {
    const cutAt = Date.now();
    await proxy.cut();

    await eventually(async () => (await healthOf(set.addresses[0]!)) === 'NOT_SERVING', 10_000, 'replica-0 NOT_SERVING');
    const notServingMs = Date.now() - cutAt;
    // It stops before etcd could expire its lease (5 s TTL), so two leaders never act at once.
    assert.ok(notServingMs < 5000, `replica-0 said NOT_SERVING ${notServingMs} ms after the cut`);
    const c0 = set.admin(0);
    const info = await new Promise<{ leader: boolean }>((resolve, reject) => c0.status.getServerInfo({}, { deadline: Date.now() + 3000 }, (e, r) => (e ? reject(e) : resolve(r!))));
    assert.equal(info.leader, false, 'replica-0 no longer claims to lead');

    await eventually(async () => (await set.leader()) === 1, 10_000, 'replica-1 leads');
    await eventually(() => agent.reconnects.some((r) => r.address === set.addresses[1]), 10_000, 'the agent moved to replica-1');
    assert.equal(await healthOf(set.addresses[1]!), 'SERVING');

    await proxy.open();
    await eventually(async () => (await healthOf(set.addresses[0]!)) === 'SERVING', 20_000, 'replica-0 serving again');
    assert.equal(await set.leader(), 1, 'the replica that came back follows');
  } finally {
    agent.close();
  }
});
