// --kubernetes-source with MCO's higher-level configs: the cluster's MCO generates the
// 99-<pool>-generated-* MachineConfigs, which arrive (and render) as MachineConfigs; mcplane does
// not generate them again, so applying a KubeletConfig or mirror set to it is refused, naming
// where to make the change, as applying a MachineConfig is.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { stringify } from 'yaml';
import { startKubeApiStandIn, type KubeApiStandIn } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { call } from '../../src/cli/client/call.ts';
import { RemoteCallError } from '../../src/machineconfig/index.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let standIn: KubeApiStandIn;
let server: TestServer;
before(async () => {
  standIn = await startKubeApiStandIn();
  // MCO's output for a KubeletConfig, as the cluster holds it.
  standIn.add({ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig', metadata: { name: '99-worker-generated-kubelet', labels: { 'machineconfiguration.openshift.io/role': 'worker' }, ownerReferences: [{ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'KubeletConfig', name: 'set-max-pods', uid: 'u1', controller: true }] }, spec: { kernelArguments: ['from-mco=1'] } });
  server = await startTestServer({ kubernetes: { kubeconfig: standIn.writeKubeconfig(mkdtempSync(join(tmpdir(), 'source-hl-'))) }, kubernetesSource: true });
});
after(async () => {
  await server?.close();
  await standIn?.close();
});

test('MCO\'s generated configs render as they come; applying a KubeletConfig here is refused', async () => {
  const cache = server.handle.controlPlane.cache;
  await eventually(() => cache.poolStatuses.get('worker')?.value.targetSources.includes('99-worker-generated-kubelet') ?? false, 10_000, 'the cluster\'s generated config rendered');
  const c = server.admin();
  const kc = { apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'KubeletConfig', metadata: { name: 'set-max-pods' }, spec: { machineConfigPoolSelector: { matchLabels: { 'pools.operator.machineconfiguration.openshift.io/worker': '' } }, kubeletConfig: { maxPods: 500 } } };
  await assert.rejects(call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'kc.yaml', text: stringify(kc) }], dryRun: false }, 'apply'), (e: RemoteCallError) => {
    assert.equal(e.grpcCode, Status.FAILED_PRECONDITION);
    assert.match(e.message, /KubeletConfig\/set-max-pods cannot be applied here: this control plane runs with --kubernetes-source/);
    return true;
  });
  assert.equal(cache.sources.length, 0);
});
