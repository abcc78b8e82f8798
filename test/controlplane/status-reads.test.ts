// Status reads over real gRPC: ListNodes pages like a Kubernetes list, ListReplicas and
// GetServerInfo describe the replica that answers.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { call } from '../../src/cli/client/call.ts';
import { RemoteCallError } from '../../src/machineconfig/index.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { poolYaml } from '../helpers/manifests.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

const { server, c, agents } = serverFixture({}, async () => {
  await call(c, c.config.apply.bind(c.config), {
    manifests: [{ source: 'infra.yaml', text: poolYaml('infra', '').replace('machineConfigSelector: {matchLabels: {machineconfiguration.openshift.io/role: infra}}', 'machineConfigSelector: {matchExpressions: [{key: machineconfiguration.openshift.io/role, operator: In, values: [worker, infra]}]}') }],
    dryRun: false,
  }, 'apply');
  // 10 workers and 3 infra nodes, registered out of name order.
  const names = [...Array.from({ length: 10 }, (_, i) => `w-${String(9 - i).padStart(2, '0')}`), 'i-0', 'i-1', 'i-2'];
  for (const name of names) {
    const infra = name.startsWith('i-');
    const agent = new SimulatedAgent({
      address: server.address, tls: await server.pki.node(name, infra ? 'infra' : 'worker'), name, autoDone: true,
      labels: infra ? { 'node-role.kubernetes.io/infra': '' } : { 'node-role.kubernetes.io/worker': '' },
    });
    await agent.connect();
    agents.push(agent);
  }
  await eventually(async () => (await call(c, c.status.listNodes.bind(c.status), { pool: 'infra', limit: 0, continueToken: '' }, 'list')).nodes.length === 3, 10_000, 'infra membership');
});

const list = (req: { pool?: string; limit?: number; continueToken?: string }) =>
  call(c, c.status.listNodes.bind(c.status), { pool: req.pool ?? '', limit: req.limit ?? 0, continueToken: req.continueToken ?? '' }, 'list nodes');

test('ListNodes pages in name order with a continue token and a remaining count', async () => {
  const all = await list({});
  assert.equal(all.nodes.length, 13);
  assert.equal(all.continueToken, '', 'no token when everything fits');
  const expected = all.nodes.map((n) => n.name);
  assert.deepEqual(expected, [...expected].sort(), 'ordered by name');

  const seen: string[] = [];
  const remaining: number[] = [];
  let token = '';
  for (let page = 0; page < 10; page++) {
    const res = await list({ limit: 4, continueToken: token });
    assert.ok(res.nodes.length <= 4);
    seen.push(...res.nodes.map((n) => n.name));
    remaining.push(res.remainingItemCount);
    token = res.continueToken;
    if (!token) break;
  }
  assert.deepEqual(seen, expected, 'the pages together are the whole list, once each');
  assert.deepEqual(remaining, [9, 5, 1, 0]);
});

test('ListNodes pages within a pool', async () => {
  const first = await list({ pool: 'worker', limit: 6 });
  assert.deepEqual(first.nodes.map((n) => n.name), ['w-00', 'w-01', 'w-02', 'w-03', 'w-04', 'w-05']);
  assert.equal(first.remainingItemCount, 4);
  const second = await list({ pool: 'worker', limit: 6, continueToken: first.continueToken });
  assert.deepEqual(second.nodes.map((n) => n.name), ['w-06', 'w-07', 'w-08', 'w-09']);
  assert.equal(second.continueToken, '');
});

test('a continue token the server did not issue, or a negative limit, is refused with the field named', async () => {
  await assert.rejects(list({ limit: 2, continueToken: 'bm90LW91cnM' }), (err: RemoteCallError) => {
    assert.equal(err.grpcCode, Status.INVALID_ARGUMENT);
    assert.match(err.message, /continue token is not one this server issued/);
    return true;
  });
  await assert.rejects(list({ limit: -1 }), (err: RemoteCallError) => err.grpcCode === Status.INVALID_ARGUMENT && /limit must be 0/.test(err.message));
});

test('ListReplicas lists the one replica as leader with its agents; GetServerInfo names the store', async () => {
  const { replicas } = await call(c, c.status.listReplicas.bind(c.status), {}, 'replicas');
  assert.equal(replicas.length, 1);
  const [r] = replicas;
  assert.equal(r!.leader, true);
  assert.equal(r!.address, server.address);
  assert.equal(r!.agentsConnected, 13);
  assert.ok(Date.now() - Number(r!.lastHeartbeatUnixMs) < 60_000);
  const info = await call(c, c.status.getServerInfo.bind(c.status), {}, 'info');
  assert.equal(info.store, process.env.MCPLANE_TEST_STORE ?? 'sqlite');
  assert.equal(info.leader, true);
  assert.equal(info.replica, r!.name);
  assert.match(info.version, /^\d+\.\d+\.\d+/);
});
