// The node health gate end to end: real agents on sandboxed hosts (files, a real systemd user
// manager, the rpm-ostree and reboot stand-ins) and the control plane over loopback mTLS. A
// failing gate rolls the node back (files, and rpm-ostree's previous deployment with a reboot when
// the update rebooted), the node reports RolledBack with the cause, and spec.rollout's breaker
// pauses the pool or rolls it back.
// The nodes are waited for on StatusService.Watch (until-node-watched.ts): RolledBack passes (the
// pool soon returns the node to Done on the previous config), and a watch sees every report where a
// poll sees only the state at its instant.

import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { runHealthGate } from '../../src/agent/health-gate.ts';
import { SystemdClient } from '../../src/agent/systemd-client.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { startUserSystemd } from '../../sandbox/user-systemd.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { demoServiceConfig, poolYaml } from '../helpers/manifests.ts';
import { sandboxFixture } from '../helpers/sandbox-fixture.ts';
import { startTestServer } from '../helpers/test-server.ts';
import { untilNodeWatched as untilNode } from '../helpers/until-node-watched.ts';

const fleet = sandboxFixture({ scope: 'test' });
const { hosts, skip } = fleet;

// The check runs on the host; in the sandbox the host's root is a directory the agent's
// environment names (a real host's check would read /etc/demo/motd).
const MOTD_CHECK = `["/bin/sh", "-c", "grep -q good \\"$MCPLANE_TEST_ROOT/etc/demo/motd\\" || { echo checking motd; echo \\"motd says: $(cat \\"$MCPLANE_TEST_ROOT/etc/demo/motd\\")\\"; exit 3; }"]`;
// Fails on a host whose environment names a kernel argument it must not boot with.
const KARG_CHECK = `["/bin/sh", "-c", "if [ -n \\"$MCPLANE_TEST_BAD_KARG\\" ] && grep -qw \\"$MCPLANE_TEST_BAD_KARG\\" \\"$MCPLANE_TEST_CMDLINE\\"; then echo \\"booted with $MCPLANE_TEST_BAD_KARG\\"; exit 4; fi"]`;

const demoConfig = (motd: string, karg = '', extraFile = '') => demoServiceConfig(motd, { kernelArguments: karg, files: extraFile ? { '/etc/demo/original': extraFile } : {} });
const noRebootPolicy = `  disruptionPolicy:
    files: [{path: /etc/demo/, actions: [{type: restart, unit: demo.service}]}]
    units: [{name: demo.service, actions: [{type: daemon-reload}, {type: restart, unit: demo.service}]}]
`;

const apply = (c: Clients, ...texts: string[]) => call(c, c.config.apply.bind(c.config), { manifests: texts.map((text, i) => ({ source: `t${i}.yaml`, text })), dryRun: false }, 'apply');
const getPool = async (c: Clients) => call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool');
const updating = async (c: Clients) => (await getPool(c)).status!.conditions.find((x) => x.type === 'Updating')!;

async function startHost(name: string, env: Record<string, string> = {}, prepare?: (h: SandboxHost) => void): Promise<SandboxHost> {
  const host = new SandboxHost({ name, server: fleet.server.address, pki: fleet.server.pki });
  hosts.push(host);
  prepare?.(host);
  await host.start({ MCPLANE_TEST_ROOT: host.root, MCPLANE_TEST_CMDLINE: host.cmdlineFile, ...env });
  return host;
}

test('a unit that is not active fails the gate, named with its state (real systemd)', { skip }, async () => {
  const systemd = await startUserSystemd();
  const client = SystemdClient.connect(systemd.busAddress);
  try {
    const cause = await runHealthGate({ units: ['absent.service'], command: [], timeout: '1s' }, { activeState: (u) => client.activeState(u) });
    assert.equal(cause, 'unit absent.service is not active (inactive) (after 1s, the health check\'s timeout)');
  } finally {
    client.close();
    await systemd.stop();
  }
});

test('Pause: the canary fails its health gate, rolls its files back, reports RolledBack with the cause, and the pool halts naming it', { skip }, async () => {
  fleet.server = await startTestServer();
  const c = fleet.server.admin();
  const pool = poolYaml('worker', `  maxUnavailable: 2
  rollout: {canary: 1, onFailure: Pause}
  healthCheck: {units: [demo.service], command: ${MOTD_CHECK}, timeout: 2s}
${noRebootPolicy}`);
  // The first config takes over a file the host had (its original is backed up); the failing
  // config gives it back, and so the rollback must make the original a backup again.
  await apply(c, pool, demoConfig('good', '', 'managed'));
  const first = (await getPool(c)).status!.configuration;
  const a = await startHost('host-a', {}, (h) => {
    mkdirSync(join(h.root, 'etc/demo'), { recursive: true });
    writeFileSync(join(h.root, 'etc/demo/original'), 'from the image\n');
  });
  await untilNode(c, hosts, 'host-a', (n) => n.status!.currentConfig === first && n.status!.state === 'Done');
  const b = await startHost('host-b');
  await untilNode(c, hosts, 'host-b', (n) => n.status!.currentConfig === first && n.status!.state === 'Done');

  await apply(c, demoConfig('bad'));
  const second = (await getPool(c)).status!.configuration;
  assert.notEqual(second, first);
  const node = await untilNode(c, hosts, 'host-a', (n) => n.status!.state === 'RolledBack');
  assert.equal(node.status!.currentConfig, first);
  assert.equal(node.status!.desiredConfig, second, 'it reports the config it failed on');
  assert.equal(node.status!.phase, 'health');
  assert.match(node.status!.reason, new RegExp(`^health: command /bin/sh -c .* exited 3: checking motd \\| motd says: bad \\(after 2s, the health check's timeout\\); rolled back to ${first}; \`mcctl node reapply\` retries ${second}`));
  assert.equal(a.file('etc/demo/motd'), 'good', 'the previous file is back');
  assert.equal(a.file('etc/demo/original'), 'managed', 'the file the failed config gave back is managed again');
  assert.equal(a.reboots, 0);

  // The breaker trips on the leader's next pass after the RolledBack report is stored, and the
  // pool's conditions follow: on etcd that can come after the node shows RolledBack here.
  await eventually(async () => (await updating(c)).reason === 'RolloutPaused', 10_000, 'the pool halted');
  const halted = await updating(c);
  assert.match(halted.message, /1 node failed on .* \(maxFailures 0\): host-a \(RolledBack: health: command \/bin\/sh/);
  assert.equal((await call(c, c.status.getNode.bind(c.status), { name: 'host-b' }, 'get')).status!.desiredConfig, first, 'the rest of the pool is not given the failed config');
  assert.equal(b.file('etc/demo/motd'), 'good');

  // The agent does not retry the config by itself (a reconnect re-sends the assignment).
  await a.kill();
  a.spawnAgent();
  await new Promise((r) => setTimeout(r, 3000));
  const after = await untilNode(c, hosts, 'host-a', (n) => n.status!.connected === true);
  assert.equal(after.status!.state, 'RolledBack');
  assert.equal(a.file('etc/demo/motd'), 'good');

  // A new config ends the halt; both nodes take it (host-a without an operator's re-apply).
  await apply(c, demoConfig('good again'));
  const third = (await getPool(c)).status!.configuration;
  for (const name of ['host-a', 'host-b']) await untilNode(c, hosts, name, (n) => n.status!.currentConfig === third && n.status!.state === 'Done');
  assert.equal(a.file('etc/demo/motd'), 'good again');
  assert.equal(a.file('etc/demo/original'), 'from the image\n', 'the original survived the rollback and comes back when no config manages it');
});

test('Rollback after a reboot update: the gate fails on the booted deployment, rpm-ostree rolls back with a reboot, and the pool returns its updated nodes to the previous config', { skip }, async () => {
  fleet.server = await startTestServer();
  const c = fleet.server.admin();
  // No health check and no rollout yet: the first config reaches every node.
  await apply(c, poolYaml('worker', '  maxUnavailable: 1\n'), demoConfig('good', 'a=1'));
  const first = (await getPool(c)).status!.configuration;
  const b = await startHost('host-b'); // registered first: it goes first
  await untilNode(c, hosts, 'host-b', (n) => n.status!.currentConfig === first && n.status!.state === 'Done');
  const a = await startHost('host-a', { MCPLANE_TEST_BAD_KARG: 'a=2' });
  await untilNode(c, hosts, 'host-a', (n) => n.status!.currentConfig === first && n.status!.state === 'Done');

  // A kernel argument change reboots; host-a cannot live with it.
  await apply(c, poolYaml('worker', `  maxUnavailable: 1
  rollout: {maxFailures: 0, onFailure: Rollback}
  healthCheck: {command: ${KARG_CHECK}, timeout: 2s}
`), demoConfig('good', 'a=2'));
  const second = (await getPool(c)).status!.configuration;
  await untilNode(c, hosts, 'host-b', (n) => n.status!.currentConfig === second && n.status!.state === 'Done', 90_000);
  assert.match(b.rpmOstree('kargs'), /a=2/);
  const failed = await untilNode(c, hosts, 'host-a', (n) => n.status!.state === 'RolledBack', 90_000);
  assert.match(failed.status!.reason, new RegExp(`^health: command /bin/sh -c .* exited 4: booted with a=2 .*; rolled back to ${first} \\(rpm-ostree rollback and a reboot\\)`));
  // Two reboots after the first config's: into the update and back (a repeated request while the
  // machine goes down is one reboot, as with logind).
  assert.equal(a.logs.filter((l) => l.includes('"msg":"mcplane-agent started"')).length, 4);
  assert.match(a.rpmOstree('kargs'), /a=1/);
  assert.doesNotMatch(a.rpmOstree('kargs'), /a=2/);
  assert.match(a.file('run/mcplane-sandbox/cmdline')!, /a=1/, 'booted back on the previous deployment');

  // The breaker trips (maxFailures 0): every node returns to the previous config, host-b too.
  for (const name of ['host-a', 'host-b']) await untilNode(c, hosts, name, (n) => n.status!.currentConfig === first && n.status!.state === 'Done', 90_000);
  assert.equal(b.logs.filter((l) => l.includes('"msg":"mcplane-agent started"')).length, 4, 'host-b rebooted into the update and back');
  assert.doesNotMatch(b.file('run/mcplane-sandbox/cmdline')!, /a=2/);
  // The pool's status follows the nodes' last reports on the leader's next pass.
  await eventually(async () => (await updating(c)).reason === 'RolledBack', 10_000, 'the pool says it rolled back');
  const p = await getPool(c);
  assert.equal(p.status!.configuration, first);
  const u = p.status!.conditions.find((x) => x.type === 'Updating')!;
  assert.equal(u.reason, 'RolledBack');
  assert.match(u.message, new RegExp(`rolled back to ${first}: 1 node failed on ${second} \\(maxFailures 0\\): host-a \\(RolledBack: health: command`));
});
