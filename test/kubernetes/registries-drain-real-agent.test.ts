// MCO's drain rules for registries changes, with the real agent and a Kubernetes Node running a
// pod (real systemd user manager over D-Bus, the rpm-ostree and reboot stand-ins, the Kubernetes
// API stand-in through @kubernetes/client-node). machine-config-operator 7ff337a4
// pkg/daemon/drain.go (isDrainRequired, isSafeContainerRegistryConfChanges): a new digest-only
// mirror is safe, so CRI-O is reloaded and the Node is neither cordoned nor drained; removing a
// mirror is not, so the Node is drained first, then CRI-O reloaded, without a reboot.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { startKubeApiStandIn } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { call } from '../../src/cli/client/call.ts';
import { untilNode } from '../helpers/converge.ts';
import { addNode, addPod, type KubeObjectLike } from '../helpers/kube-workloads.ts';
import { containerRuntimeBase } from '../helpers/container-runtime-base.ts';
import { startTestServer } from '../helpers/test-server.ts';
import { assertCallsAllowed } from './rbac.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';

const mirrorSet = (mirrors: string[]) => ({
  apiVersion: 'config.openshift.io/v1', kind: 'ImageDigestMirrorSet', metadata: { name: 'mirror-ubi' },
  spec: { imageDigestMirrors: [{ source: 'registry.access.redhat.com/ubi9', mirrors }] },
});

test('a real agent: a new digest-only mirror reloads CRI-O with no drain; removing a mirror drains the Node first, still without a reboot', { skip }, async () => {
  const standIn = await startKubeApiStandIn({ timeScale: 0.01 });
  addNode(standIn, 'host-a', { 'node-role.kubernetes.io/worker': '' });
  addNode(standIn, 'host-b', { 'node-role.kubernetes.io/worker': '' });
  const kubeconfig = standIn.writeKubeconfig(mkdtempSync(join(tmpdir(), 'registries-drain-')));
  const server = await startTestServer({ kubernetes: { kubeconfig }, drain: { retryBaseMs: 150, retryMaxMs: 600, pollMs: 50 } });
  const host = new SandboxHost({ name: 'host-a', server: server.address, pki: server.pki });
  const c = server.admin();
  const apply = (...docs: Record<string, unknown>[]) => call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'r.yaml', text: docs.map((d) => stringify(d)).join('---\n') }], dryRun: false }, 'apply');
  const target = async () => (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.configuration;
  const doneAfter = async (previous: string) => {
    const want = await target();
    assert.notEqual(want, previous, 'the Apply changed the pool\'s rendered config');
    return untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === want && n.status!.state === 'Done', 60_000);
  };
  const evictions = () => standIn.requests.filter((r) => r.subresource === 'eviction' && r.code === 201).map((r) => r.name);
  // Sampled all along: was host-a ever cordoned (annotation patches are node patches too)?
  let cordonedSeen = 0;
  const sampler = setInterval(() => {
    if ((standIn.get('Node', 'host-a') as unknown as KubeObjectLike | undefined)?.spec?.unschedulable === true) cordonedSeen++;
  }, 10);
  const reloads = () => (host.file('crio-reloads') ?? '').split('\n').filter(Boolean).length;
  try {
    await apply(...containerRuntimeBase(`${host.root}/crio-reloads`));
    await host.start();
    await doneAfter('');
    host.systemd.systemctl('start', 'crio.service');
    // A workload lands on the Node once it runs.
    addPod(standIn, { namespace: 'shop', name: 'web', node: 'host-a', graceSeconds: 60 });

    // Safe: a new digest-only mirror.
    let previous = await target();
    let reboots = host.reboots;
    cordonedSeen = 0;
    let before = { evicted: evictions().length, reloads: reloads() };
    await apply(mirrorSet(['mirror.example.com/ubi9']));
    let node = await doneAfter(previous);
    assert.match(node.status!.lastDisruption, /^reload crio\.service$/);
    assert.equal(host.reboots, reboots, 'no reboot');
    assert.equal(reloads(), before.reloads + 1, 'CRI-O reloaded');
    assert.equal(evictions().length, before.evicted, 'nothing evicted');
    assert.equal(cordonedSeen, 0, 'the Node was never cordoned');

    // Not safe: a mirror removed.
    previous = await target();
    reboots = host.reboots;
    before = { evicted: evictions().length, reloads: reloads() };
    await apply(mirrorSet(['mirror2.example.com/ubi9']));
    node = await doneAfter(previous);
    assert.match(node.status!.lastDisruption, /reload crio\.service/);
    assert.equal(host.reboots, reboots, 'no reboot');
    assert.ok(reloads() > before.reloads, 'CRI-O reloaded');
    assert.deepEqual(evictions().slice(before.evicted), ['web'], 'the Node was drained');
    assert.ok(cordonedSeen > 0, 'and cordoned for it');
    await untilNode(c, [host], 'host-a', () => (standIn.get('Node', 'host-a') as unknown as KubeObjectLike).spec?.unschedulable !== true, 10_000);
    assertCallsAllowed(standIn.requests);
  } finally {
    clearInterval(sampler);
    await host.stop();
    await server.close();
    await standIn.close();
  }
});
