// MCO's disruption rules for the configs generated from higher-level objects, on a real agent: a
// real control plane (mTLS gRPC), a real systemd user manager over D-Bus, the rpm-ostree and
// reboot stand-ins. A new digest-only mirror (ImageDigestMirrorSet) only reloads CRI-O, as MCO's
// built-in policy for /etc/containers/registries.conf says (machine-config-operator 7ff337a4
// pkg/daemon/constants/constants.go, the Special action, and pkg/daemon/drain.go
// isSafeContainerRegistryConfChanges); a policy.json change (the Image config's blocked
// registries) reloads CRI-O too; a KubeletConfig's kubelet.conf, which no built-in policy
// covers, reboots the node, as MCO's default.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { call } from '../../src/cli/client/call.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from '../helpers/converge.ts';
import { containerRuntimeBase } from '../helpers/container-runtime-base.ts';
import { fileEntry, ign, mcDoc } from '../helpers/manifests.ts';
import { sandboxFixture } from '../helpers/sandbox-fixture.ts';

let host: SandboxHost;
const { skip, server, c, hosts, target } = sandboxFixture({
  setUp: async () => { hosts.push(host = new SandboxHost({ name: 'hl-worker', server: server.address, pki: server.pki })); },
});

const KUBELET = 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 250\n';

const apply = (...docs: Record<string, unknown>[]) => call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'hl.yaml', text: docs.map((d) => stringify(d)).join('---\n') }], dryRun: false }, 'apply');
const reloads = () => (host.file('crio-reloads') ?? '').split('\n').filter(Boolean).length;
/** The node Done on the pool's new target, which must differ from `previous` (the Apply generated something). */
const doneAfter = async (previous: string) => {
  const want = await target();
  assert.notEqual(want, previous, 'the Apply changed the pool\'s rendered config');
  return untilNode(c, [host], 'hl-worker', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
};

test('the pool\'s base configs and CRI-O, as an imported cluster brings them', { skip }, async () => {
  await apply(
    mcDoc('01-worker-kubelet', 'worker', { config: ign('3.4.0', { storage: { files: [fileEntry('/etc/kubernetes/kubelet.conf', KUBELET)] } }) }),
    ...containerRuntimeBase(`${host.root}/crio-reloads`),
  );
  await host.start();
  await doneAfter('');
  host.systemd.systemctl('start', 'crio.service');
  assert.equal(host.systemd.systemctl('is-active', 'crio.service').stdout.trim(), 'active');
});

test('a new digest-only mirror reloads CRI-O, without a reboot', { skip }, async () => {
  const reboots = host.reboots;
  const before = reloads();
  const previous = await target();
  await apply({
    apiVersion: 'config.openshift.io/v1', kind: 'ImageDigestMirrorSet', metadata: { name: 'mirror-ubi' },
    spec: { imageDigestMirrors: [{ source: 'registry.access.redhat.com/ubi9', mirrors: ['mirror.example.com/ubi9'] }] },
  });
  const node = await doneAfter(previous);
  assert.equal(host.reboots, reboots, 'no reboot');
  assert.match(node.status!.lastDisruption, /^reload crio\.service$/);
  assert.equal(reloads(), before + 1, 'CRI-O reloaded once');
  assert.match(host.file('etc/containers/registries.conf')!, /location = "registry.access.redhat.com\/ubi9"[\s\S]*location = "mirror.example.com\/ubi9"\n\s*pull-from-mirror = "digest-only"/);
});

test('a blocked registry (the Image config) rewrites policy.json and reloads CRI-O, without a reboot', { skip }, async () => {
  const reboots = host.reboots;
  const before = reloads();
  const previous = await target();
  await apply({ apiVersion: 'config.openshift.io/v1', kind: 'Image', metadata: { name: 'cluster' }, spec: { registrySources: { blockedRegistries: ['untrusted.example.com'] } } });
  const node = await doneAfter(previous);
  assert.equal(host.reboots, reboots, 'no reboot');
  assert.match(node.status!.lastDisruption, /reload crio\.service/);
  assert.ok(reloads() > before, 'CRI-O reloaded');
  assert.match(host.file('etc/containers/policy.json')!, /untrusted\.example\.com/);
});

test('a KubeletConfig rewrites kubelet.conf, which no built-in policy covers: the node reboots, as MCO\'s default', { skip }, async () => {
  const reboots = host.reboots;
  const previous = await target();
  await apply({
    apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'KubeletConfig', metadata: { name: 'max-pods' },
    spec: { machineConfigPoolSelector: { matchLabels: { 'pools.operator.machineconfiguration.openshift.io/worker': '' } }, kubeletConfig: { maxPods: 500 } },
  });
  const node = await doneAfter(previous);
  assert.equal(host.reboots, reboots + 1, 'rebooted once');
  assert.match(node.status!.lastDisruption, /^reboot: file \/etc\/kubernetes\/kubelet\.conf changed/);
  assert.match(host.file('etc/kubernetes/kubelet.conf')!, /^maxPods: 500$/m);
});
