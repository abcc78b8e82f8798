// Offline `mcctl render` and `mcctl validate` with KubeletConfigs and mirror sets: the rendered
// config holds the MachineConfigs the control plane would generate (machine-config-operator
// 7ff337a4 pkg/controller/kubelet-config/helpers.go generateKubeletIgnFiles,
// pkg/controller/container-runtime-config/helpers.go updateRegistriesConfig).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { containerRuntimeConfigYaml, kubeletBaseConfig, kubeletConfigYaml, UBI_MIRROR_SET } from '../helpers/higher-level-manifests.ts';
import { runCli } from '../helpers/run-cli.ts';

const BASE = kubeletBaseConfig('kind: KubeletConfiguration\nmaxPods: 250\n');
const SOURCES = kubeletConfigYaml('max-pods', 'worker', 500) + UBI_MIRROR_SET;

test('render includes the generated kubelet and registries configs; validate names the sources', () => {
  const r = runCli(['render', '-f', '-', '--pool', 'worker', '-o', 'json'], { input: BASE + SOURCES });
  assert.equal(r.status, 0, r.stderr);
  const rendered = JSON.parse(r.stdout);
  const file = (path: string) => Buffer.from(rendered.spec.config.storage.files.find((f: { path: string }) => f.path === path).contents.source.split(',')[1], 'base64').toString();
  assert.match(file('/etc/kubernetes/kubelet.conf'), /^maxPods: 500$/m);
  assert.match(file('/etc/containers/registries.conf'), /location = "mirror.example.com\/ubi9"\n {4}pull-from-mirror = "digest-only"/);
  const v = runCli(['validate', '-f', '-'], { input: BASE + SOURCES });
  assert.equal(v.stdout, '3 documents valid: MachineConfig/01-worker-kubelet, KubeletConfig/max-pods, ImageDigestMirrorSet/ubi\n');
});

test('a source that cannot be generated fails render, naming object, field and rule', () => {
  const r = runCli(['render', '-f', '-', '--pool', 'master'], { input: SOURCES.replace('worker: ""', 'master: ""') });
  assert.notEqual(r.status, 0);
  assert.equal(r.stdout, '');
  assert.match(r.stderr, /KubeletConfig\/max-pods: spec: no MachineConfig of pool master provides \/etc\/kubernetes\/kubelet\.conf.*\[base-config-missing\]/);
});

// A custom pool, and sources that select only it (issue 35): rendering worker must not see them as
// selecting no pool, since the pool they select is given on the command line.
const INFRA_POOL = `---
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: infra, labels: {pools.operator.machineconfiguration.openshift.io/infra: ""}}
spec:
  machineConfigSelector:
    matchExpressions: [{key: machineconfiguration.openshift.io/role, operator: In, values: [worker, infra]}]
  nodeSelector: {matchLabels: {node-role.kubernetes.io/infra: ""}}
`;
const INFRA_KUBELET = kubeletConfigYaml('infra-kubelet', 'infra', 100);
const INFRA_SOURCES = INFRA_KUBELET + containerRuntimeConfigYaml('infra-crio', 'infra', '{logLevel: debug}');
const fileIn = (rendered: { spec: { config: { storage: { files: { path: string; contents: { source: string } }[] } } } }, path: string): string =>
  Buffer.from(rendered.spec.config.storage.files.find((f) => f.path === path)!.contents.source.split(',')[1]!, 'base64').toString();

test('render --pool worker ignores a KubeletConfig and ContainerRuntimeConfig that select only a custom pool given on the command line', () => {
  const input = BASE + INFRA_POOL + INFRA_SOURCES;
  for (const format of ['json', 'yaml']) {
    const r = runCli(['render', '-f', '-', '--pool', 'worker', '-o', format], { input });
    assert.equal(r.status, 0, r.stderr);
  }
  const worker = JSON.parse(runCli(['render', '-f', '-', '--pool', 'worker', '-o', 'json'], { input }).stdout);
  assert.match(fileIn(worker, '/etc/kubernetes/kubelet.conf'), /^maxPods: 250$/m);
  assert.equal(worker.metadata.annotations['mcplane.io/source-configs'], '01-worker-kubelet');
  // The pool they select still gets them.
  const infra = runCli(['render', '-f', '-', '--pool', 'infra', '-o', 'json'], { input });
  assert.equal(infra.status, 0, infra.stderr);
  assert.match(fileIn(JSON.parse(infra.stdout), '/etc/kubernetes/kubelet.conf'), /^maxPods: 100$/m);
});

test('a KubeletConfig that selects no pool on the command line (nor a built-in one) still fails render with no-pool', () => {
  const r = runCli(['render', '-f', '-', '--pool', 'worker'], { input: BASE + INFRA_KUBELET });
  assert.notEqual(r.status, 0);
  assert.equal(r.stdout, '');
  assert.match(r.stderr, /KubeletConfig\/infra-kubelet: spec\.machineConfigPoolSelector: KubeletConfig infra-kubelet does not match any MachineConfigPools \[no-pool\]/);
});

test('a source that cannot be generated for another pool does not stop this pool\'s render', () => {
  // master has no kubelet.conf here, so max-pods cannot be generated for master; worker is unaffected.
  const r = runCli(['render', '-f', '-', '--pool', 'worker', '-o', 'json'], { input: BASE + SOURCES.replace('worker: ""', 'master: ""') });
  assert.equal(r.status, 0, r.stderr);
  assert.match(fileIn(JSON.parse(r.stdout), '/etc/kubernetes/kubelet.conf'), /^maxPods: 250$/m);
});
