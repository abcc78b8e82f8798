// --kubernetes-source with MCO's higher-level configs: the cluster's KubeletConfigs,
// ContainerRuntimeConfigs, Image config and mirror sets are taken into the store like its
// MachineConfigs, and mcplane generates their MachineConfigs itself (as `mcctl import` does): the
// cluster's MCO output for a config it takes (a MachineConfig owned by it) is not taken, while one
// whose owner is not in the cluster still is. Changes and deletions in the cluster follow; applying
// these kinds to mcplane is refused, naming where to make the change. Real @kubernetes/client-node
// against the API stand-in; MCO's generation: machine-config-operator 7ff337a4
// pkg/controller/kubelet-config/kubelet_config_controller.go (syncKubeletConfig).

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
import { fileEntry, ign, mcDoc } from '../helpers/manifests.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';
import { assertCallsAllowed } from './rbac.ts';

const KUBELET = 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 250\n';
const kubeletConfig = (maxPods: number) => ({
  apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'KubeletConfig', metadata: { name: 'set-max-pods', uid: 'kc-uid' },
  spec: { machineConfigPoolSelector: { matchLabels: { 'pools.operator.machineconfiguration.openshift.io/worker': '' } }, kubeletConfig: { maxPods } },
});

let standIn: KubeApiStandIn;
let server: TestServer;
before(async () => {
  standIn = await startKubeApiStandIn();
  // The pool's base kubelet.conf, as an OpenShift cluster holds it.
  standIn.add({ ...mcDoc('01-worker-kubelet', 'worker', { config: ign('3.4.0', { storage: { files: [fileEntry('/etc/kubernetes/kubelet.conf', KUBELET)] } }) }) } as never);
  standIn.add(kubeletConfig(500) as never);
  // MCO's output for that KubeletConfig: not taken, mcplane generates its own.
  standIn.add({ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig', metadata: { name: '99-worker-generated-kubelet', labels: { 'machineconfiguration.openshift.io/role': 'worker' }, ownerReferences: [{ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'KubeletConfig', name: 'set-max-pods', uid: 'kc-uid', controller: true }] }, spec: { kernelArguments: ['from-mco=1'] } } as never);
  // MCO's output for a ContainerRuntimeConfig the cluster no longer has: taken as it is.
  standIn.add({ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig', metadata: { name: '99-worker-generated-containerruntime', labels: { 'machineconfiguration.openshift.io/role': 'worker' }, ownerReferences: [{ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'ContainerRuntimeConfig', name: 'gone', uid: 'crc-uid', controller: true }] }, spec: { kernelArguments: ['orphan=1'] } } as never);
  server = await startTestServer({ kubernetes: { kubeconfig: standIn.writeKubeconfig(mkdtempSync(join(tmpdir(), 'source-hl-'))) }, kubernetesSource: true });
});
after(async () => {
  // Whatever the test did, mcplane stayed within packaging/kubernetes/rbac.yaml (watch included).
  if (standIn) assertCallsAllowed(standIn.requests);
  await server?.close();
  await standIn?.close();
});

const generatedKubelet = () => server.handle.controlPlane.cache.configs.get('99-worker-generated-kubelet')?.value;
const kubeletConf = () => {
  const file = generatedKubelet()?.spec.config.storage?.files.find((f) => f.path === '/etc/kubernetes/kubelet.conf');
  return file ? Buffer.from(file.contents.source.replace(/^data:[^,]*;base64,/, ''), 'base64').toString() : undefined;
};

test('a KubeletConfig in the cluster is taken, and mcplane generates its MachineConfig instead of taking MCO\'s', async () => {
  const cache = server.handle.controlPlane.cache;
  await eventually(() => cache.sourcesOf('KubeletConfig').has('set-max-pods') && /^maxPods: 500$/m.test(kubeletConf() ?? ''), 10_000, 'the KubeletConfig taken and its config generated');
  const mc = generatedKubelet()!;
  assert.deepEqual(mc.metadata.ownerReferences?.map((o) => `${o.kind}/${o.name}`), ['KubeletConfig/set-max-pods'], 'mcplane\'s own, owned by the source');
  assert.ok(!mc.spec.kernelArguments?.includes('from-mco=1'), 'not MCO\'s copy');
  assert.deepEqual(cache.configs.get('99-worker-generated-containerruntime')?.value.spec.kernelArguments, ['orphan=1'], 'an owner the cluster lacks: taken as a MachineConfig');
  await eventually(() => cache.poolStatuses.get('worker')?.value.targetSources.includes('99-worker-generated-kubelet') ?? false, 10_000, 'rendered into worker');
  // Kinds the stand-in serves but the cluster holds none of, and a kind whose CRD it lacks,
  // do not hold the sync up: the KubeletConfig above came through.
});

test('a change and a deletion of the KubeletConfig in the cluster follow', async () => {
  const cache = server.handle.controlPlane.cache;
  standIn.put(kubeletConfig(600) as never);
  await eventually(() => /^maxPods: 600$/m.test(kubeletConf() ?? ''), 10_000, 'the change generated again');
  // As MCO does on the cluster: its generated config goes with its KubeletConfig.
  standIn.remove('KubeletConfig', 'set-max-pods');
  standIn.remove('MachineConfig', '99-worker-generated-kubelet');
  await eventually(() => !cache.sourcesOf('KubeletConfig').has('set-max-pods') && generatedKubelet() === undefined, 10_000, 'the KubeletConfig and its generated config gone');
});

test('applying a KubeletConfig to mcplane is refused: it comes from the cluster', async () => {
  const c = server.admin();
  await assert.rejects(call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'kc.yaml', text: stringify(kubeletConfig(700)) }], dryRun: false }, 'apply'), (e: RemoteCallError) => {
    assert.equal(e.grpcCode, Status.FAILED_PRECONDITION);
    assert.match(e.message, /KubeletConfig\/set-max-pods cannot be applied here: this control plane runs with --kubernetes-source/);
    return true;
  });
});

test('a PinnedImageSet in the cluster is taken, follows its changes and deletion, and generates nothing', async () => {
  const cache = server.handle.controlPlane.cache;
  const set = (digest: string) => ({ apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'PinnedImageSet', metadata: { name: 'release', uid: 'pis-uid', generation: 1 }, spec: { pinnedImages: [{ name: `quay.io/openshift-release-dev/ocp-release@sha256:${digest.repeat(64)}` }] } });
  const images = () => (cache.sourcesOf('PinnedImageSet').get('release')?.value as { spec?: { pinnedImages: { name: string }[] } } | undefined)?.spec?.pinnedImages.map((i) => i.name);
  const configs = cache.configs.size;
  standIn.add(set('a') as never);
  await eventually(() => images()?.[0]?.endsWith('a'.repeat(64)) === true, 10_000, 'the PinnedImageSet taken');
  standIn.put(set('b') as never);
  await eventually(() => images()?.[0]?.endsWith('b'.repeat(64)) === true, 10_000, 'its change taken');
  assert.equal(cache.configs.size, configs, 'no MachineConfig generated from it');
  standIn.remove('PinnedImageSet', 'release');
  await eventually(() => !cache.sourcesOf('PinnedImageSet').has('release'), 10_000, 'its deletion followed');
});
