// --kubernetes-source: a control plane (the in-process test server, on SQLite or etcd) takes its
// MachineConfigs and pools from a cluster shaped like a real OpenShift one (the Kubernetes API
// stand-in, driven through the real @kubernetes/client-node), follows changes, keeps the last
// good render for an invalid object (RenderDegraded, a Warning Event counted on repeat), writes
// MCO's pool status back, resumes its watch and relists after a 410, and refuses mcctl's
// changes to what the cluster owns.

import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import * as k8s from '@kubernetes/client-node';
import { startKubeApiStandIn, type KubeApiStandIn } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { POOL_SPEC_ANNOTATION, RemoteCallError } from '../../src/machineconfig/index.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';
import { openshiftClusterObjects, userChronyConfig } from './openshift-cluster-objects.ts';
import { assertCallsAllowed } from './rbac.ts';

const GROUP = 'machineconfiguration.openshift.io';
const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

async function until<T>(what: string, read: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 15_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await read();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('--kubernetes-source against a cluster shaped like OpenShift', () => {
  let standIn: KubeApiStandIn;
  let server: TestServer;
  let c: Clients;
  let custom: k8s.CustomObjectsApi;
  let core: k8s.CoreV1Api;
  let kubeconfig: string;
  const mc = { group: GROUP, version: 'v1', plural: 'machineconfigs' };
  const mcp = { group: GROUP, version: 'v1', plural: 'machineconfigpools' };

  before(async () => {
    standIn = await startKubeApiStandIn();
    for (const o of openshiftClusterObjects()) standIn.add(o);
    const dir = mkdtempSync(join(tmpdir(), 'kube-source-'));
    kubeconfig = standIn.writeKubeconfig(dir);
    // The test plays the cluster's administrator (oc apply) with a user of its own, so the
    // request log tells mcplane's calls apart for the RBAC check.
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(standIn.writeKubeconfig(dir, 'admin', 'admin'));
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    core = kc.makeApiClient(k8s.CoreV1Api);
    server = await startTestServer({ kubernetes: { kubeconfig }, kubernetesSource: true });
    c = server.admin();
  });
  after(async () => {
    await server?.close();
    await standIn?.close();
  });

  const cache = () => server.handle.controlPlane.cache;
  const poolStatus = (name: string) => cache().poolStatuses.get(name)?.value;
  const clusterPool = (name: string) => standIn.get('MachineConfigPool', name)!;

  it('takes every MachineConfig and pool from the cluster (MCO\'s rendered-* skipped), status and MCO fields stripped, and renders them', async () => {
    await until('the cluster objects in the store', () => cache().configs.has('50-examplecorp-chrony') && cache().pools.has('infra'));
    assert.deepEqual([...cache().configs.keys()].sort(), ['00-master', '00-worker', '50-examplecorp-chrony', '99-master-ssh', '99-worker-generated-registries', '99-worker-ssh']);
    assert.deepEqual([...cache().pools.keys()].sort(), ['infra', 'master', 'worker']);
    const worker = await until('the worker pool rendered from them', () => {
      const s = poolStatus('worker');
      return s?.targetSources.length === 4 ? s : undefined;
    });
    assert.deepEqual(worker.targetSources, ['00-worker', '50-examplecorp-chrony', '99-worker-generated-registries', '99-worker-ssh'].sort());
    assert.match(worker.target, /^rendered-worker-[0-9a-f]{32}$/);
    const stored = cache().configs.get('50-examplecorp-chrony')!.value;
    assert.equal(stored.spec.config.storage?.files?.[0]?.mode, 420);
    assert.equal(stored.metadata.annotations?.['kubectl.kubernetes.io/last-applied-configuration'], undefined, 'kubectl\'s copy is not configuration');
    // The same through the API an operator uses.
    const { pools } = await call(c, c.status.listPools.bind(c.status), {}, 'list pools');
    assert.deepEqual(pools.map((p) => p.name).sort(), ['infra', 'master', 'worker']);
  });

  it('writes MCO\'s status to each MachineConfigPool\'s status subresource', async () => {
    const worker = await until('the worker MCP status from mcplane', () => {
      const s = clusterPool('worker').status;
      return s?.configuration?.name === poolStatus('worker')?.target && s.observedGeneration === clusterPool('worker').metadata.generation ? s : undefined;
    });
    assert.deepEqual(worker.configuration.source.map((s: { name: string }) => s.name), poolStatus('worker')!.targetSources);
    assert.deepEqual(worker.configuration.source[0], { apiVersion: `${GROUP}/v1`, kind: 'MachineConfig', name: '00-worker' });
    for (const field of ['machineCount', 'updatedMachineCount', 'readyMachineCount', 'unavailableMachineCount', 'degradedMachineCount']) assert.equal(worker[field], 0, field);
    assert.deepEqual(worker.conditions.map((x: { type: string }) => x.type).sort(), ['Degraded', 'NodeDegraded', 'RenderDegraded', 'Updated', 'Updating']);
    for (const cond of worker.conditions) {
      assert.match(cond.lastTransitionTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      assert.ok(cond.message, `${cond.type} has a message`);
    }
    assert.equal(worker.certExpirys, undefined, 'the status is mcplane\'s now, not MCO\'s leftovers');
    const infra = await until('the infra MCP status', () => clusterPool('infra').status?.configuration?.name?.startsWith('rendered-infra-') && clusterPool('infra').status);
    assert.equal(infra.observedGeneration, 1);
    // A status write is not a spec change: generation stays, and nothing loops.
    const rv = clusterPool('worker').metadata.resourceVersion;
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(clusterPool('worker').metadata.resourceVersion, rv, 'no rewrite of an unchanged status');
    assert.ok(standIn.requests.some((r) => r.verb === 'update' && r.resource === 'machineconfigpools' && r.subresource === 'status' && r.code === 200));
  });

  it('follows the cluster: a changed, a new and a deleted MachineConfig, and a spec change of a pool', async () => {
    const before = poolStatus('worker')!.target;
    await custom.patchClusterCustomObject({ ...mc, name: '50-examplecorp-chrony', body: { spec: { kernelArguments: ['nosmt'] } } }, merge);
    await until('the changed config', () => cache().configs.get('50-examplecorp-chrony')?.value.spec.kernelArguments.includes('nosmt'));
    const after = await until('a new worker render', () => poolStatus('worker')!.target !== before && poolStatus('worker')!.target);
    await until('the MCP status to name the new render', () => clusterPool('worker').status.configuration.name === after);

    await custom.createClusterCustomObject({ ...mc, body: { apiVersion: `${GROUP}/v1`, kind: 'MachineConfig', metadata: { name: '60-worker-kargs', labels: { [`${GROUP}/role`]: 'worker' } }, spec: { kernelArguments: ['audit=1'] } } });
    await until('the new config', () => cache().configs.has('60-worker-kargs'));
    await until('the worker render to take it', () => poolStatus('worker')!.targetSources.includes('60-worker-kargs'));
    await custom.deleteClusterCustomObject({ ...mc, name: '60-worker-kargs' });
    await until('the deleted config gone', () => !cache().configs.has('60-worker-kargs'));

    await custom.patchClusterCustomObject({ ...mcp, name: 'infra', body: { spec: { paused: true, maxUnavailable: '25%' } } }, merge);
    await until('the paused infra pool', () => cache().pools.get('infra')?.value.spec.paused === true);
    assert.equal(cache().pools.get('infra')!.value.spec.maxUnavailable, '25%');
    await until('observedGeneration 2 on infra', () => clusterPool('infra').status?.observedGeneration === 2);
  });

  it('mcplane\'s own pool fields, pruned from spec by MCO\'s CRD, reach the pool through the mcplane.io/pool-spec annotation', async () => {
    const windows = [{ schedule: '0 2 * * 6', duration: '4h', timeZone: 'Europe/Berlin' }];
    // In spec the API server drops them, as a real cluster with MCO's CRD does.
    await custom.patchClusterCustomObject({ ...mcp, name: 'infra', body: { spec: { maintenanceWindows: windows } } }, merge);
    assert.equal(clusterPool('infra').spec.maintenanceWindows, undefined, 'pruned by the structural schema');
    await custom.patchClusterCustomObject({ ...mcp, name: 'infra', body: { metadata: { annotations: { [POOL_SPEC_ANNOTATION]: JSON.stringify({ maintenanceWindows: windows, rollout: { canary: 1, soak: '10m' } }) } } } }, merge);
    await until('the windows from the annotation', () => cache().pools.get('infra')?.value.spec.maintenanceWindows?.length === 1);
    assert.deepEqual(cache().pools.get('infra')!.value.spec.maintenanceWindows, windows);
    assert.deepEqual(cache().pools.get('infra')!.value.spec.rollout, { canary: 1, soak: '10m', maxFailures: 0, onFailure: 'Pause' });
    await custom.patchClusterCustomObject({ ...mcp, name: 'infra', body: { metadata: { annotations: { [POOL_SPEC_ANNOTATION]: null } } } }, merge);
    await until('the windows gone with the annotation', () => cache().pools.get('infra')?.value.spec.maintenanceWindows === undefined);
  });

  it('an invalid MachineConfig is not taken: the last good render stays, RenderDegraded has the full message, and one Warning Event counts repeats', async () => {
    const good = poolStatus('worker')!.target;
    const chrony = userChronyConfig();
    const current = await custom.getClusterCustomObject({ ...mc, name: '50-examplecorp-chrony' });
    // A bad change to a config that was good: its last good version keeps rendering.
    current.spec.kernelType = 'turbo';
    current.spec.config.storage.files[0].mode = 2541; // 04755
    await custom.replaceClusterCustomObject({ ...mc, name: '50-examplecorp-chrony', body: current });
    const degraded = await until('RenderDegraded on worker', () => {
      const cond = poolStatus('worker')?.status?.conditions.find((x) => x.type === 'RenderDegraded');
      return cond?.status === 'True' ? cond : undefined;
    });
    assert.equal(poolStatus('worker')!.target, good, 'the last good render stays the target');
    assert.equal(cache().configs.get('50-examplecorp-chrony')!.value.spec.kernelType, 'default', 'the store keeps the last good version');
    assert.match(degraded.message, /kubernetes: MachineConfig\/50-examplecorp-chrony: spec\.kernelType: unknown kernelType "turbo"; expected one of: default, realtime, 64k-pages \[kernel-type\]/);
    assert.match(degraded.message, /spec\.config\.storage\.files\[0\]\.mode: .*04755.* \[file-mode-range\]/);
    assert.match(degraded.message, new RegExp(`nodes keep ${good}`));
    // The infra pool takes worker configs too: it says so as well.
    await until('RenderDegraded on infra', () => poolStatus('infra')?.status?.conditions.find((x) => x.type === 'RenderDegraded')?.status === 'True');
    // ...and so does the MachineConfigPool in the cluster, with the same full message.
    const clusterCond = await until('RenderDegraded in the cluster', () => clusterPool('worker').status.conditions.find((x: any) => x.type === 'RenderDegraded' && x.status === 'True'));
    assert.equal(clusterCond.message, degraded.message);
    assert.equal(clusterPool('worker').status.conditions.find((x: any) => x.type === 'Degraded').status, 'True');

    const event = await until('a Warning Event on the MachineConfig', async () => {
      const events = await core.listNamespacedEvent({ namespace: 'default', fieldSelector: 'involvedObject.name=50-examplecorp-chrony' });
      return events.items.length ? events.items : undefined;
    });
    assert.equal(event.length, 1);
    const e = event[0]!;
    assert.deepEqual([e.type, e.reason, e.count, e.involvedObject.kind, e.involvedObject.apiVersion, e.source?.component], ['Warning', 'InvalidMachineConfig', 1, 'MachineConfig', `${GROUP}/v1`, 'mcplane-server']);
    assert.equal(e.involvedObject.uid, standIn.get('MachineConfig', '50-examplecorp-chrony')!.metadata.uid);
    assert.match(e.message!, /MachineConfig\/50-examplecorp-chrony is invalid and was not taken \(mcplane keeps using its last good version\): .*unknown kernelType "turbo"/);

    // The same mistake again (a new generation, same problems): the Event counts, no new one.
    const countOf = async (n: number) => until(`count ${n}`, async () => {
      const events = await core.listNamespacedEvent({ namespace: 'default', fieldSelector: 'involvedObject.name=50-examplecorp-chrony' });
      assert.equal(events.items.length, 1, 'one Event, counted');
      return events.items[0]!.count === n ? events.items[0] : undefined;
    });
    await custom.patchClusterCustomObject({ ...mc, name: '50-examplecorp-chrony', body: { metadata: { labels: { touched: 'yes' } }, spec: { osImageURL: '' } } }, merge);
    await countOf(2);
    await custom.patchClusterCustomObject({ ...mc, name: '50-examplecorp-chrony', body: { spec: { fips: false } } }, merge);
    const counted = await countOf(3);
    assert.equal(counted.metadata!.name, e.metadata!.name);
    // Status writes and relists are not repeats.
    const count = counted.count;
    standIn.closeWatches();
    await new Promise((r) => setTimeout(r, 500));
    const still = await core.listNamespacedEvent({ namespace: 'default', fieldSelector: 'involvedObject.name=50-examplecorp-chrony' });
    assert.deepEqual(still.items.map((x) => x.count), [count]);

    // A brand-new invalid config: nothing of it is stored.
    await custom.createClusterCustomObject({ ...mc, body: { apiVersion: `${GROUP}/v1`, kind: 'MachineConfig', metadata: { name: '70-bad-path', labels: { [`${GROUP}/role`]: 'worker' } }, spec: { config: { ignition: { version: '3.4.0' }, storage: { files: [{ path: '/usr/bin/x', contents: { source: 'data:,x' }, mode: 420 }] } } } } });
    await until('the second problem in RenderDegraded', () => poolStatus('worker')?.status?.conditions.find((x) => x.type === 'RenderDegraded')?.message.includes('MachineConfig/70-bad-path: spec.config.storage.files[0].path'));
    assert.equal(cache().configs.has('70-bad-path'), false);
    const badEvent = await until('the Event for 70-bad-path', async () => (await core.listNamespacedEvent({ namespace: 'default', fieldSelector: 'involvedObject.name=70-bad-path' })).items[0]);
    assert.match(badEvent.message!, /mcplane has no valid version of it, so it is not used/);

    // Fixed in the cluster: taken, and the pools render cleanly again.
    await custom.replaceClusterCustomObject({ ...mc, name: '50-examplecorp-chrony', body: { ...(await custom.getClusterCustomObject({ ...mc, name: '50-examplecorp-chrony' })), spec: chrony.spec } });
    await custom.deleteClusterCustomObject({ ...mc, name: '70-bad-path' });
    await until('RenderDegraded False', () => poolStatus('worker')?.status?.conditions.find((x) => x.type === 'RenderDegraded')?.status === 'False');
    await until('the cluster pool clean', () => clusterPool('worker').status.conditions.find((x: any) => x.type === 'RenderDegraded').status === 'False');
    assert.equal(cache().kubernetesSource?.value.invalid.length, 0);
  });

  it('an invalid MachineConfigPool gets its status (RenderDegraded) and an Event, and is not stored', async () => {
    await custom.createClusterCustomObject({ ...mcp, body: { apiVersion: `${GROUP}/v1`, kind: 'MachineConfigPool', metadata: { name: 'gpu' }, spec: { machineConfigSelector: { matchLabels: { [`${GROUP}/role`]: 'gpu' } }, nodeSelector: { matchLabels: { 'node-role.kubernetes.io/gpu': '' } }, maxUnavailable: '150%' } } });
    const status = await until('the gpu pool status', () => clusterPool('gpu').status);
    const cond = status.conditions.find((x: any) => x.type === 'RenderDegraded');
    assert.equal(cond.status, 'True');
    assert.match(cond.message, /kubernetes: MachineConfigPool\/gpu: spec\.maxUnavailable: maxUnavailable must be a whole number or a percentage from 0% to 100%, got "150%" \[max-unavailable\]/);
    assert.equal(status.observedGeneration, 1);
    assert.equal(cache().pools.has('gpu'), false);
    await until('the gpu Event', async () => (await core.listNamespacedEvent({ namespace: 'default', fieldSelector: 'involvedObject.name=gpu' })).items.find((e) => e.reason === 'InvalidMachineConfigPool'));
    await custom.patchClusterCustomObject({ ...mcp, name: 'gpu', body: { spec: { maxUnavailable: 1 } } }, merge);
    await until('the fixed gpu pool stored', () => cache().pools.has('gpu'));
    await until('its status from the render', () => clusterPool('gpu').status.configuration.name.startsWith('rendered-gpu-') && clusterPool('gpu').status.observedGeneration === 2);
    await custom.deleteClusterCustomObject({ ...mcp, name: 'gpu' });
    await until('the deleted pool gone', () => !cache().pools.has('gpu'));
  });

  it('an object with many problems is reported with the first 20 and how many more, so the record stays bounded', async () => {
    const files = Array.from({ length: 30 }, (_, i) => ({ path: `/usr/bin/x${i}`, contents: { source: 'data:,x' }, mode: 420 }));
    await custom.createClusterCustomObject({ ...mc, body: { apiVersion: `${GROUP}/v1`, kind: 'MachineConfig', metadata: { name: '75-many', labels: { [`${GROUP}/role`]: 'master' } }, spec: { config: { ignition: { version: '3.4.0' }, storage: { files } } } } });
    const message = await until('RenderDegraded on master', () => {
      const cond = poolStatus('master')?.status?.conditions.find((x) => x.type === 'RenderDegraded');
      return cond?.status === 'True' ? cond.message : undefined;
    });
    assert.equal((message.match(/\[path-writable-root\]/g) ?? []).length, 20);
    assert.match(message, /\.\.\. and 10 more problems \(fix these to see the rest\) \[more-problems\]$/);
    await custom.deleteClusterCustomObject({ ...mc, name: '75-many' });
    await until('master clean again', () => poolStatus('master')?.status?.conditions.find((x) => x.type === 'RenderDegraded')?.status === 'False');
  });

  it('resumes its watch after the server closes it, and lists again after a 410 Gone', async () => {
    const lists = () => standIn.requests.filter((r) => r.verb === 'list' && r.resource === 'machineconfigs').length;
    const listsBefore = lists();
    standIn.closeWatches();
    await custom.createClusterCustomObject({ ...mc, body: { apiVersion: `${GROUP}/v1`, kind: 'MachineConfig', metadata: { name: '61-resumed', labels: { [`${GROUP}/role`]: 'worker' } }, spec: { kernelArguments: ['a=1'] } } });
    await until('a change made while the watch was down', () => cache().configs.has('61-resumed'));
    assert.equal(lists(), listsBefore, 'a resumed watch does not list again');
    const resumed = standIn.requests.filter((r) => r.verb === 'watch' && r.resource === 'machineconfigs').at(-1)!;
    assert.match(resumed.path, /resourceVersion=\d+/);

    // Compacted history: the resume is refused with 410, so the informer lists again.
    await new Promise((r) => setTimeout(r, 100));
    standIn.compact();
    standIn.closeWatches();
    await custom.deleteClusterCustomObject({ ...mc, name: '61-resumed' });
    standIn.compact();
    await until('the delete seen after the relist', () => !cache().configs.has('61-resumed'));
    assert.ok(lists() > listsBefore, 'listed again after 410 Gone');
    assert.ok(standIn.requests.some((r) => r.verb === 'watch' && r.resource === 'machineconfigs' && r.code === 200));
  });

  it('node counts reach the MachineConfigPool status: two agents join the worker pool and roll out a change made in the cluster', async () => {
    const agents: SimulatedAgent[] = [];
    try {
      for (const name of ['w-1', 'w-2']) {
        const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name), name, autoDone: true, labels: { 'node-role.kubernetes.io/worker': '' } });
        await agent.connect();
        agents.push(agent);
      }
      const first = await until('2 of 2 updated in the cluster', () => {
        const s = clusterPool('worker').status;
        return s.machineCount === 2 && s.updatedMachineCount === 2 && s.readyMachineCount === 2 ? s : undefined;
      });
      assert.equal(first.conditions.find((x: any) => x.type === 'Updated').status, 'True');
      await custom.createClusterCustomObject({ ...mc, body: { apiVersion: `${GROUP}/v1`, kind: 'MachineConfig', metadata: { name: '65-worker-audit', labels: { [`${GROUP}/role`]: 'worker' } }, spec: { kernelArguments: ['audit=1'] } } });
      const target = await until('a new worker render', () => poolStatus('worker')!.targetSources.includes('65-worker-audit') && poolStatus('worker')!.target);
      await until('the agents on it', () => agents.every((a) => a.status.currentConfig === target));
      const done = await until('2 of 2 updated to it in the cluster', () => {
        const s = clusterPool('worker').status;
        return s.configuration.name === target && s.updatedMachineCount === 2 && s.conditions.find((x: any) => x.type === 'Updated').status === 'True' ? s : undefined;
      });
      assert.equal(done.unavailableMachineCount, 0);
      assert.equal(done.degradedMachineCount, 0);
    } finally {
      for (const a of agents) a.close();
    }
  });

  it('mcctl apply, delete and pause of what the cluster owns are refused, saying the cluster is the source', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kube-source-apply-'));
    writeFileSync(join(dir, 'mc.yaml'), `apiVersion: ${GROUP}/v1\nkind: MachineConfig\nmetadata:\n  name: 80-local\n  labels: {${GROUP}/role: worker}\nspec:\n  kernelArguments: [x=1]\n`);
    const env = { MCPLANE_SERVER: server.address, MCPLANE_PKI_DIR: server.pki.dir };
    const applied = await runCliAsync(['apply', '-f', join(dir, 'mc.yaml')], { env });
    assert.equal(applied.status, 1);
    assert.match(applied.stderr, /MachineConfig\/80-local cannot be applied here: this control plane runs with --kubernetes-source, so MachineConfigs, MachineConfigPools and the higher-level configs come from the Kubernetes cluster \(https:\/\/127\.0\.0\.1:\d+\); change them there \(oc apply -f\) and mcplane follows/);
    assert.equal(cache().configs.has('80-local'), false);
    const deleted = await runCliAsync(['delete', 'mc', '00-worker'], { env });
    assert.equal(deleted.status, 1);
    assert.match(deleted.stderr, /MachineConfig\/00-worker cannot be deleted here: .*--kubernetes-source.*\(oc delete\)/);
    await assert.rejects(call(c, c.config.setPoolPaused.bind(c.config), { name: 'worker', paused: true }, 'pause pool'),
      (err: RemoteCallError) => err.grpcCode === Status.FAILED_PRECONDITION && /cannot be paused here.*oc patch mcp/.test(err.message));
    // The cluster-wide disruption policy is not part of the source: it still applies.
    const policy = await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'p.yaml', text: 'apiVersion: operator.openshift.io/v1\nkind: MachineConfiguration\nmetadata: {name: cluster}\nspec: {nodeDisruptionPolicy: {sshkey: {actions: [{type: None}]}}}\n' }], dryRun: false }, 'apply');
    assert.equal(policy.objects[0]!.action, 'created');
    assert.ok(cache().configs.has('00-worker'));
  });

  it('every call mcplane made to the cluster is allowed by packaging/kubernetes/rbac.yaml', () => {
    const calls = standIn.requests.filter((r) => r.user === 'mcplane');
    for (const needed of ['list machineconfigs', 'watch machineconfigs', 'list machineconfigpools', 'watch machineconfigpools', 'update machineconfigpools/status', 'create events', 'patch events']) {
      assert.ok(calls.some((r) => `${r.verb} ${r.resource}${r.subresource ? `/${r.subresource}` : ''}` === needed), `mcplane made a "${needed}" call`);
    }
    assert.ok(assertCallsAllowed(standIn.requests) > 10);
  });
});
