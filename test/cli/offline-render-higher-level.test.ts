// Offline `mcctl render` and `mcctl validate` with KubeletConfigs and mirror sets: the rendered
// config holds the MachineConfigs the control plane would generate (machine-config-operator
// 7ff337a4 pkg/controller/kubelet-config/helpers.go generateKubeletIgnFiles,
// pkg/controller/container-runtime-config/helpers.go updateRegistriesConfig).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from '../helpers/run-cli.ts';

const b64 = (s: string) => Buffer.from(s).toString('base64');
const BASE = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 01-worker-kubelet, labels: {machineconfiguration.openshift.io/role: worker}}
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
        - {path: /etc/kubernetes/kubelet.conf, contents: {source: "data:;base64,${b64('kind: KubeletConfiguration\nmaxPods: 250\n')}"}}
        - {path: /etc/containers/registries.conf, contents: {source: "data:;base64,${b64('unqualified-search-registries = ["docker.io"]\n')}"}}
`;
const SOURCES = `---
apiVersion: machineconfiguration.openshift.io/v1
kind: KubeletConfig
metadata: {name: max-pods}
spec:
  machineConfigPoolSelector: {matchLabels: {pools.operator.machineconfiguration.openshift.io/worker: ""}}
  kubeletConfig: {maxPods: 500}
---
apiVersion: config.openshift.io/v1
kind: ImageDigestMirrorSet
metadata: {name: ubi}
spec:
  imageDigestMirrors: [{source: registry.access.redhat.com/ubi9, mirrors: [mirror.example.com/ubi9]}]
`;

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
