// --kubernetes-source on two real mcplane-server replicas sharing a real etcd: only the leader
// reads the cluster and writes to it (each replica has its own token on the Kubernetes API
// stand-in, so its request log says who called); when the leader is killed, the new leader
// lists, watches and writes pool status, and a change made in the cluster after the failover
// reaches every replica.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startKubeApiStandIn, type KubeApiStandIn } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { startEtcdCluster, type EtcdCluster } from '../../sandbox/etcd-cluster.ts';
import { call } from '../../src/cli/client/call.ts';
import { startReplicaSet, type ReplicaSet } from '../helpers/replica-set.ts';
import { testPki } from '../helpers/test-pki.ts';
import { silenceIpServernameWarning } from '../../src/runtime/process-warnings.ts';
import { openshiftClusterObjects } from './openshift-cluster-objects.ts';
import { assertCallsAllowed } from './rbac.ts';

silenceIpServernameWarning();
const GROUP = 'machineconfiguration.openshift.io';

async function until<T>(what: string, read: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 20_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      const v = await read();
      if (v !== undefined && v !== false) return v;
    } catch { /* not yet */ }
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('--kubernetes-source with two replicas on etcd: the leader only', () => {
  let standIn: KubeApiStandIn;
  let etcd: EtcdCluster;
  let set: ReplicaSet;

  before(async () => {
    standIn = await startKubeApiStandIn();
    for (const o of openshiftClusterObjects()) standIn.add(o);
    const dir = mkdtempSync(join(tmpdir(), 'kube-source-replicas-'));
    const kubeconfigs = ['replica-0', 'replica-1'].map((user) => {
      standIn.addUser(user);
      return standIn.writeKubeconfig(dir, `${user}.kubeconfig`, user);
    });
    etcd = await startEtcdCluster({ members: 1 });
    set = await startReplicaSet({
      endpoints: etcd.endpoints, count: 2, pkiDir: (await testPki()).dir,
      argsFor: (i) => ['--store', `etcd://${etcd.endpoints.join(',')}`, '--kubeconfig', kubeconfigs[i]!, '--kubernetes-source'],
    });
  });
  after(async () => {
    await set?.stop();
    await etcd?.stop();
    await standIn?.close();
  });

  const configsOn = async (i: number) => {
    const c = set.admin(i);
    return (await call(c, c.config.listMachineConfigs.bind(c.config), {}, 'list mc')).machineConfigs.map((m) => m.name);
  };
  const callsBy = (user: string) => standIn.requests.filter((r) => r.user === user);

  it('the leader takes the cluster\'s objects and writes pool status; the follower serves them without calling the cluster', async () => {
    assert.equal(await set.waitForLeader(15_000), 0);
    await until('the cluster\'s configs on the follower', async () => (await configsOn(1)).includes('50-examplecorp-chrony'));
    await until('the worker MCP status', () => standIn.get('MachineConfigPool', 'worker')?.status?.configuration?.name?.startsWith('rendered-worker-'));
    assert.ok(callsBy('replica-0').some((r) => r.verb === 'watch' && r.resource === 'machineconfigs'));
    assert.ok(callsBy('replica-0').some((r) => r.verb === 'update' && r.subresource === 'status'));
    assert.deepEqual(callsBy('replica-1').map((r) => `${r.verb} ${r.resource}`), [], 'a follower neither reads nor writes the cluster');
  });

  it('after the leader is killed, the new leader watches and writes; a change in the cluster reaches both views', async () => {
    await set.kill(0);
    assert.equal(await set.waitForLeader(20_000, 0), 1);
    await until('the new leader listing and watching', () => callsBy('replica-1').some((r) => r.verb === 'watch' && r.resource === 'machineconfigpools'));
    standIn.add({ apiVersion: `${GROUP}/v1`, kind: 'MachineConfig', metadata: { name: '70-after-failover', labels: { [`${GROUP}/role`]: 'worker' } }, spec: { kernelArguments: ['after=failover'] } });
    await until('the new config on replica-1', async () => (await configsOn(1)).includes('70-after-failover'));
    await until('the MCP status written by the new leader', () =>
      callsBy('replica-1').some((r) => r.verb === 'update' && r.resource === 'machineconfigpools' && r.subresource === 'status' && r.code === 200));
    const c = set.admin(1);
    const worker = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool');
    assert.ok(worker.status!.configurationSources.includes('70-after-failover'));
    await until('the cluster\'s worker status naming the new render', () => standIn.get('MachineConfigPool', 'worker')!.status.configuration.name === worker.status!.configuration);
    await set.restart(0);
    assert.equal(await set.leader(), 1, 'the restarted replica follows');
    const before = callsBy('replica-0').length;
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(callsBy('replica-0').length, before, 'the restarted follower does not call the cluster');
  });

  it('every call the replicas made is allowed by packaging/kubernetes/rbac.yaml', () => {
    assert.ok(assertCallsAllowed(standIn.requests) > 5);
  });
});
