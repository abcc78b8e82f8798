// Two real mcplane-server processes on a real etcd, each serving /metrics: both export the same
// fleet view (so max by (pool) is right), exactly one says it leads, each sees both replicas,
// a phase is timed only by the replica holding the node's stream (so summing histograms over
// replicas counts it once), and after the leader is killed the other one says it leads.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { freePort, startEtcdCluster, type EtcdCluster } from '../../sandbox/etcd-cluster.ts';
import { mcYaml } from '../helpers/manifests.ts';
import { sample, scrape } from '../helpers/prometheus-text.ts';
import { startReplicaSet, type ReplicaSet } from '../helpers/replica-set.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { testPki, type TestPki } from '../helpers/test-pki.ts';

let etcd: EtcdCluster;
let set: ReplicaSet;
let pki: TestPki;
let agent: SimulatedAgent | undefined;
const urls: string[] = [];

before(async () => {
  pki = await testPki();
  etcd = await startEtcdCluster({ members: 1 });
  const ports = [await freePort(), await freePort()];
  for (const p of ports) urls.push(`http://127.0.0.1:${p}/metrics`);
  set = await startReplicaSet({
    endpoints: etcd.endpoints, count: 2, pkiDir: pki.dir,
    argsFor: (i) => ['--store', `etcd://${etcd.endpoints.join(',')}`, '--metrics-listen', `127.0.0.1:${ports[i]}`],
  });
});
after(async () => {
  agent?.close();
  await set?.stop();
  await etcd?.stop();
});

test('each replica exports the fleet with its replica label; one leads; phases are timed once; a failover moves mcplane_leader', async () => {
  // The agent talks to replica-1, which does not lead (replica-0 was elected first).
  agent = new SimulatedAgent({ address: set.addresses[1]!, tls: await pki.node('node-a'), name: 'node-a', autoDone: true, doneAfterMs: 200 });
  await agent.connect();
  const c = set.admin(0);
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'k.yaml', text: mcYaml('50-karg', 'worker', '  kernelArguments: [a=1]\n') }], dryRun: false }, 'apply');
  const target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  await eventually(() => agent!.status.currentConfig === target && agent!.status.state === 'Done', 20_000, 'rollout');

  let views: Awaited<ReturnType<typeof scrape>>[] = [];
  await eventually(async () => {
    views = await Promise.all(urls.map((u) => scrape(u)));
    return views.every((m) => sample(m, 'mco_updated_machine_count', { pool: 'worker' }) === 1 && sample(m, 'mcplane_replicas') === 2);
  }, 15_000, 'both replicas see the rollout and each other');
  for (const [i, m] of views.entries()) {
    assert.ok(m.every((s) => s.labels.replica === `replica-${i}`), `replica-${i} labels its series`);
    assert.equal(sample(m, 'mco_machine_count', { pool: 'worker' }), 1);
    assert.equal(sample(m, 'mcplane_agents_connected', { pool: 'worker' }), 1, 'a session held by the other replica counts too');
  }
  assert.deepEqual(views.map((m) => sample(m, 'mcplane_leader')), [1, 0]);
  // Only replica-1 holds the stream, so only it timed the node's apply.
  assert.equal(sample(views[0]!, 'mcplane_update_phase_duration_seconds_count', { phase: 'apply' }), undefined);
  assert.ok(sample(views[1]!, 'mcplane_update_phase_duration_seconds_count', { phase: 'apply' })! >= 1);
  // The leader rendered; the other replica did not.
  assert.ok(sample(views[0]!, 'mcplane_renders_total', { result: 'ok' })! >= 1);
  assert.equal(sample(views[1]!, 'mcplane_renders_total', { result: 'ok' }), undefined);

  await set.kill(0);
  await eventually(async () => {
    const m = await scrape(urls[1]!);
    return sample(m, 'mcplane_leader') === 1 && sample(m, 'mcplane_replicas') === 1;
  }, 20_000, 'replica-1 leads after replica-0 is killed');
});
