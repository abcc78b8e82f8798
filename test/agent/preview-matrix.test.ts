// The dry-run preview is the truth: for each kind of change, preview it, apply it, and check that
// every node took the action the preview predicted. Real control plane (mTLS gRPC on loopback),
// real agents with a real systemd user manager over D-Bus, the rpm-ostree and reboot stand-ins.
// One host per pool; each round changes both pools, with different kinds where they do not
// interfere, so the matrix takes a handful of rounds.

import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { applyCommand } from '../../src/cli/commands/write.ts';
import type { NodePreview__Output } from '../../src/runtime/generated/mcplane/v1/NodePreview.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { untilNode } from '../helpers/converge.ts';
import { demoServiceConfig, INFRA_POOL_WITH_UNIT_POLICY } from '../helpers/manifests.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let server: TestServer;
let c: Clients;
let worker: SandboxHost;
let infra: SandboxHost;
const hosts = (): SandboxHost[] => [worker, infra];

const clusterPolicy = `apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata: {name: cluster}
spec:
  nodeDisruptionPolicy:
    files:
      - path: /etc/demo/
        actions: [{type: Restart, restart: {serviceName: demo.service}}]
`;
const infraPool = INFRA_POOL_WITH_UNIT_POLICY;
interface Shared { motd: string; unitText: string; key: string; kargs: string; image: string }
const shared = (s: Shared) => demoServiceConfig(s.motd, {
  name: '50-shared', description: s.unitText, sshKey: s.key,
  tail: `${s.kargs ? `  kernelArguments: [${s.kargs}]\n` : ''}${s.image ? `  osImageURL: ${s.image}\n` : ''}`,
});
const infraOnly = (extra: string) => `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 60-infra, labels: {machineconfiguration.openshift.io/role: infra}}
spec:
${extra}`;
const infraFile = (text: string) => `  config:
    ignition: {version: 3.4.0}
    storage:
      files:
        - {path: /etc/infra.conf, mode: 0644, contents: {source: "data:,${encodeURIComponent(text)}"}}
`;

let state: Shared = { motd: 'one', unitText: 'demo', key: 'ssh-ed25519 AAAA one', kargs: '', image: '' };

before(async () => {
  if (skip) return;
  server = await startTestServer();
  c = server.admin();
  worker = new SandboxHost({ name: 'w1', server: server.address, pki: server.pki });
  infra = new SandboxHost({ name: 'i1', server: server.address, pki: server.pki, pool: 'infra', labels: { 'node-role.kubernetes.io/infra': '' } });
  await apply(false, clusterPolicy, infraPool, shared(state), infraOnly(infraFile('a')));
  await Promise.all([worker.start(), infra.start()]);
  for (const [h, pool] of [[worker, 'worker'], [infra, 'infra']] as const) {
    const want = await target(pool);
    await untilNode(c, hosts(), h.options.name, (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  }
});
after(async () => {
  if (skip) return;
  await Promise.all(hosts().map((h) => h?.stop()));
  await server?.close();
});

const target = async (pool: string) => (await call(c, c.status.getPool.bind(c.status), { name: pool }, 'get')).status!.configuration;
function apply(dryRun: boolean, ...texts: string[]) {
  return call(c, c.config.apply.bind(c.config), { manifests: texts.map((text, i) => ({ source: `m${i}.yaml`, text })), dryRun }, 'apply');
}

/** The action the agent took, read from what it reports: "reboot: …", or its actions in order. */
function takenAction(lastDisruption: string): string {
  if (lastDisruption.startsWith('reboot:')) return 'reboot';
  for (const a of ['drain', 'restart', 'reload', 'daemon-reload']) if (lastDisruption.split(', ').some((x) => x.split(' ')[0] === a)) return a;
  return 'none';
}

/** Previews `texts`, applies them, waits for both nodes, and checks each did what was predicted. */
async function round(texts: string[], expect: Record<string, string>): Promise<NodePreview__Output[]> {
  // A node that is still coming back from the last round's reboot would be previewed as
  // disconnected (no batch): start from a settled fleet.
  for (const h of hosts()) await untilNode(c, hosts(), h.options.name, (n) => n.status!.connected && n.status!.state === 'Done');
  const preview = await apply(true, ...texts);
  const predicted = preview.nodePreviews;
  assert.deepEqual(Object.fromEntries(predicted.map((n) => [n.node, n.action])), expect, JSON.stringify(predicted, null, 2));
  const reboots = { w1: worker.reboots, i1: infra.reboots };
  await apply(false, ...texts);
  for (const n of predicted) {
    const want = await target(n.pool);
    const host = n.node === 'w1' ? worker : infra;
    const node = await untilNode(c, hosts(), n.node, (x) => x.status!.currentConfig === want && x.status!.state === 'Done');
    if (n.action === 'none' && n.batch === 0) continue; // already on the config: nothing ran
    assert.equal(takenAction(node.status!.lastDisruption), n.action, `${n.node}: predicted ${n.action} (${n.why}), took "${node.status!.lastDisruption}"`);
    assert.equal(host.reboots - reboots[n.node as 'w1' | 'i1'], n.action === 'reboot' ? 1 : 0, `${n.node}: reboots`);
    if (n.action === 'reboot') {
      // The reasons the agent gives are the changes the preview said reboot.
      const reasons = node.status!.lastDisruption.slice('reboot: '.length).split('; ').map((r) => r.replace(/: (no disruption policy covers it|policy says reboot)$/, ''));
      assert.deepEqual(reasons.sort(), n.rules.filter((r) => r.actions === 'reboot').map((r) => r.change).sort());
    } else {
      assert.equal(node.status!.lastDisruption, n.actions, `${n.node}: the actions in order`);
    }
  }
  return predicted;
}

test('file with a policy (cluster entry) and file without one: restart on the worker, reboot on infra', { skip }, async () => {
  state = { ...state, motd: 'two' };
  const p = await round([shared(state), infraOnly(infraFile('b'))], { w1: 'restart', i1: 'reboot' });
  const w = p.find((n) => n.node === 'w1')!;
  assert.equal(w.why, 'file /etc/demo/motd changed: MachineConfiguration/cluster spec.nodeDisruptionPolicy.files[0] (/etc/demo/)');
  assert.equal(w.batch, 1);
  assert.equal(w.window, '-');
  const i = p.find((n) => n.node === 'i1')!;
  assert.equal(i.why, 'file /etc/infra.conf changed: default: no disruption policy entry covers it, so it reboots');
});

test('a unit: the worker has no policy for it (reboot), the infra pool restarts it (its own entry)', { skip }, async () => {
  state = { ...state, unitText: 'demo v2' };
  const p = await round([shared(state)], { w1: 'reboot', i1: 'restart' });
  assert.equal(p.find((n) => n.node === 'i1')!.why, 'unit demo.service changed: MachineConfigPool/infra spec.disruptionPolicy.units[0] (demo.service)');
  assert.equal(p.find((n) => n.node === 'i1')!.actions, 'daemon-reload, restart demo.service');
});

test('an SSH key needs nothing, by default', { skip }, async () => {
  state = { ...state, key: 'ssh-ed25519 AAAA two' };
  const p = await round([shared(state)], { w1: 'none', i1: 'none' });
  assert.equal(p[0]!.why, 'core SSH keys changed: default: SSH key changes need no disruption');
});

test('a kernel argument reboots both; kernel type and an extension together reboot infra only', { skip }, async () => {
  state = { ...state, kargs: 'hugepages=16' };
  await round([shared(state)], { w1: 'reboot', i1: 'reboot' });
  const p = await round([infraOnly(`${infraFile('b')}  kernelType: realtime\n  extensions: [usbguard]\n`)], { i1: 'reboot' });
  assert.equal(p[0]!.rules.map((r) => r.change).join('; '), 'kernelType changed; extensions changed');
});

test('a mix: an OS image with a policy-covered file reboots, and the preview names both changes', { skip }, async () => {
  state = { ...state, motd: 'three', image: 'quay.io/example/os@sha256:0123456789abcdef' };
  const dir = mkdtempSync(join(tmpdir(), 'preview-'));
  writeFileSync(join(dir, 'mix.yaml'), shared(state));
  // What an operator sees: the usual lines, each pool's diff, then one row per node.
  const text = await applyCommand(c, [join(dir, 'mix.yaml')], true);
  if (process.env.SHOW_PREVIEW) process.stdout.write(text);
  assert.match(text, /^machineconfig\/50-shared configured \(dry run\)$/m);
  assert.match(text, /^  OS image -> quay\.io\/example\/os@sha256:0123456789abcdef$/m);
  // The image is downloaded ahead of the reboot (staging): when each node stages and is disrupted.
  assert.match(text, /^NODE\s+POOL\s+ACTION\s+WHY\s+BATCH\s+WINDOW\s+STAGES\s+DISRUPTED$/m);
  assert.match(text, /^w1\s+worker\s+reboot\s+osImageURL changed: default: osImageURL changes always reboot.*\s1\s+-\s+now\s+\S+Z, once staged$/m);
  const p = await round([shared(state)], { w1: 'reboot', i1: 'reboot' });
  assert.deepEqual(p[0]!.rules.map((r) => [r.change, r.actions]), [['osImageURL changed', 'reboot'], ['file /etc/demo/motd changed', 'restart demo.service']]);
});
