// Once with the real agent: a sandboxed host (real systemd user manager over D-Bus, the
// rpm-ostree and reboot stand-ins) whose Kubernetes Node runs a pod. A config that reboots
// reaches the host's disk only after the leader has drained the Node, and the Node is
// uncordoned once the host is Done.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { call } from '../../src/cli/client/call.ts';
import { untilNode } from '../helpers/converge.ts';
import { evictablePodsOn, type KubeObjectLike } from '../helpers/kube-workloads.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { startKubeRealAgentBed } from '../helpers/kube-real-agent-bed.ts';
import { assertCallsAllowed } from './rbac.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';

test('a real agent: the rebooting config lands on the host only after its Node is drained, then the Node is uncordoned', { skip }, async () => {
  const { standIn, server, host, close } = await startKubeRealAgentBed({
    tmpPrefix: 'drain-real-',
    pods: [{ namespace: 'shop', name: 'web', graceSeconds: 60 }, { namespace: 'kube-system', name: 'ds-host-a', daemonSet: true }],
    drain: { retryBaseMs: 150, retryMaxMs: 600, pollMs: 50 },
  });
  // Sampled all along: was the file on disk while a pod the drain must remove was on the Node?
  const violations: string[] = [];
  const file = join(host.root, 'etc/chrony.conf');
  const sampler = setInterval(() => {
    const pods = evictablePodsOn(standIn, 'host-a').map((p) => p.metadata.name);
    if (existsSync(file) && pods.length) violations.push(`file written while ${pods.join(', ')} ran`);
  }, 10);
  try {
    const c = server.admin();
    await call(c, c.config.apply.bind(c.config), { manifests: [
      { source: 'pool.yaml', text: poolYaml('worker') },
      { source: 'chrony.yaml', text: mcYaml('50-chrony', 'worker', '  config:\n    ignition: {version: 3.4.0}\n    storage:\n      files:\n      - {path: /etc/chrony.conf, mode: 0644, contents: {source: "data:,server%20ntp1"}}\n') },
    ], dryRun: false }, 'apply');
    const target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.configuration;
    await host.start();
    // A file no policy covers: the agent reboots for it, so the leader drains first.
    const node = await untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === target && n.status!.state === 'Done', 60_000);
    assert.match(node.status!.lastDisruption, /^reboot: file \/etc\/chrony.conf added/);
    assert.ok(host.reboots >= 1);
    assert.equal(host.file('etc/chrony.conf'), 'server ntp1');
    assert.deepEqual(violations, []);
    const evicted = standIn.requests.filter((r) => r.subresource === 'eviction' && r.code === 201).map((r) => r.name);
    assert.deepEqual(evicted, ['web'], 'the pod was evicted, the DaemonSet pod left alone');
    await untilNode(c, [host], 'host-a', () => (standIn.get('Node', 'host-a') as unknown as KubeObjectLike).spec?.unschedulable !== true, 10_000);
    assertCallsAllowed(standIn.requests);
    await eventually(() => (standIn.get('Node', 'host-a') as unknown as KubeObjectLike).metadata.annotations?.['machineconfiguration.openshift.io/currentConfig'] === target, 5000, 'currentConfig annotation');
    // The leader's drain is part of mcplane's own record of the update: an event, and a
    // control-plane phase before the agent's in the node's history.
    await eventually(async () => (await call(c, c.status.listEvents.bind(c.status), { node: 'host-a', pool: '', limit: 0 }, 'events')).events.some((e) => e.reason === 'Drained'), 5000, 'a Drained event');
    const history = await call(c, c.status.getNodeHistory.bind(c.status), { name: 'host-a' }, 'history');
    const update = history.updates.find((u) => u.toConfig === target);
    assert.ok(update, 'the update to the target is in the history');
    const drain = update.phases.find((p) => p.name === 'drain');
    assert.equal(drain?.source, 'control-plane');
    assert.ok(Number(drain.endedUnixMs) >= Number(drain.startedUnixMs) && Number(drain.endedUnixMs) > 0, 'the drain phase ended');
    assert.equal(update.phases[0]?.name, 'drain', 'the drain came before the agent\'s first step');
  } finally {
    clearInterval(sampler);
    await close();
  }
});
