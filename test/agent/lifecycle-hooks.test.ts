// Lifecycle hooks end to end (spec.hooks, the mcplane.io/hooks annotation): real agents on
// sandboxed hosts with a real systemd user manager, whose hook actions run as transient units
// of that manager; the control plane over loopback mTLS; mcctl as a user runs it. A failing
// before* hook stops the update with the host as it was; a hook that hangs is killed with its
// cgroup at its timeout; a failing after* hook fails the update and the pool's onFailure
// follows; `if` conditions skip actions; every action lands in the node's history and events.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { untilNode } from '../helpers/converge.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { demoServiceConfig, poolYaml } from '../helpers/manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';
import { scaled } from '../helpers/time-scale.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let server: TestServer | undefined;
let hosts: SandboxHost[] = [];
afterEach(async () => {
  for (const h of hosts) await h.stop();
  hosts = [];
  await server?.close();
  server = undefined;
});

const noRebootPolicy = `  disruptionPolicy:
    files: [{path: /etc/demo/, actions: [{type: none}]}]
    units: [{name: demo.service, actions: [{type: none}]}]
`;
const apply = (c: Clients, ...texts: string[]) => call(c, c.config.apply.bind(c.config), { manifests: texts.map((text, i) => ({ source: `t${i}.yaml`, text })), dryRun: false }, 'apply');
const target = async (c: Clients) => (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.configuration;
const history = async (c: Clients, name: string) => (await call(c, c.status.getNodeHistory.bind(c.status), { name }, 'history')).updates;
const events = async (c: Clients, node: string) => (await call(c, c.status.listEvents.bind(c.status), { node, pool: '', limit: 0 }, 'events')).events.map((e) => `${e.type} ${e.reason}: ${e.message}`);
const cli = (...args: string[]) => runCliAsync(['--server', server!.address, '--pki-dir', server!.pki.dir, '--config', '/dev/null', ...args]);
const journalOf = (h: SandboxHost) => JSON.parse(readFileSync(join(h.stateDir, 'journal.json'), 'utf8'));
const agentStarts = (h: SandboxHost) => h.logs.filter((l) => l.includes('"msg":"mcplane-agent started"')).length;
/** A shell action as YAML flow: `sh('echo x')` is {run: [/bin/sh, -c, "echo x"]}. */
const sh = (script: string, extra = '') => `{run: [/bin/sh, -c, ${JSON.stringify(script)}]${extra}}`;
const hooksPool = (hooks: string, extra = noRebootPolicy) => poolYaml('worker', `  maxUnavailable: 1\n  hooks:\n${hooks}${extra}`);
const processesMatching = (pattern: string) => spawnSync('pgrep', ['-f', pattern], { encoding: 'utf8' }).stdout.trim();

function newHost(name: string): SandboxHost {
  const host = new SandboxHost({ name, server: server!.address, pki: server!.pki });
  hosts.push(host);
  return host;
}

/** The host on a first config under `pool` (whose hooks pass on it), Done. */
async function onFirstConfig(c: Clients, host: SandboxHost, pool: string, first = demoServiceConfig('good')): Promise<string> {
  await apply(c, pool, first);
  const rendered = await target(c);
  await host.start();
  await untilNode(c, hosts, host.options.name, (n) => n.status!.currentConfig === rendered && n.status!.state === 'Done', 90_000);
  return rendered;
}

/** A worker MachineConfig with nothing but the mcplane.io/hooks annotation, its value as given (YAML). */
const hooksConfig = (value: string): string => `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 60-hooks
  labels: {machineconfiguration.openshift.io/role: worker}
  annotations:
    mcplane.io/hooks: ${value}
spec: {config: {ignition: {version: 3.4.0}}}
`;

test('spec.hooks and the mcplane.io/hooks annotation are checked when applied: each bad field named with its rule', async () => {
  server = await startTestServer();
  const c = server.admin();
  const bad = poolYaml('worker', `  hooks:
    beforeUpdating: [{run: [systemctl, stop, x]}, {run: [/bin/true], timeout: 2h}, {run: [/bin/true], env: {"1BAD": x, MCPLANE_HOOK: y}}]
    afterRebooting: [{run: [/bin/true], workDir: relative/dir, if: [etc/motd]}, {cmd: [/bin/true]}]
    duringUpdating: []
`);
  await assert.rejects(apply(c, bad), (err: Error) => {
    assert.match(err.message, /spec\.hooks\.beforeUpdating\[0\]\.run\[0\]: the command runs without a shell or PATH: its first word must be an absolute path, got "systemctl"/);
    assert.match(err.message, /spec\.hooks\.beforeUpdating\[1\]\.timeout: a hook's timeout must be a duration from 1s to 1h such as 30s or 5m, got "2h"/);
    assert.match(err.message, /spec\.hooks\.beforeUpdating\[2\]\.env\.1BAD: "1BAD" is not an environment variable name/);
    assert.match(err.message, /spec\.hooks\.beforeUpdating\[2\]\.env\.MCPLANE_HOOK: names starting with MCPLANE_ are set by the agent/);
    assert.match(err.message, /spec\.hooks\.afterRebooting\[0\]\.workDir: must be an absolute path/);
    assert.match(err.message, /spec\.hooks\.afterRebooting\[0\]\.if\[0\]: "etc\/motd" is not an absolute path/);
    assert.match(err.message, /spec\.hooks\.afterRebooting\[1\]\.cmd: unknown field "cmd"/);
    assert.match(err.message, /spec\.hooks\.afterRebooting\[1\]\.run: an action needs run/);
    assert.match(err.message, /spec\.hooks\.duringUpdating: unknown field "duringUpdating"/);
    return true;
  });
  const annotated = hooksConfig(`'{"afterUpdating": [{"run": ["/bin/true"], "timeout": "soon"}]}'`);
  await assert.rejects(apply(c, annotated), /metadata\.annotations\[mcplane\.io\/hooks\]\.afterUpdating\[0\]\.timeout: a hook's timeout must be a duration/);
  await assert.rejects(apply(c, annotated.replace(/'\{.*\}'/, "'[1, 2'")), /metadata\.annotations\[mcplane\.io\/hooks\]: is not YAML or JSON/);
});

test('a failing beforeRebooting hook stops the update with nothing changed: which hook, its exit status and output are in the reason, the history and the events', { skip }, async () => {
  server = await startTestServer();
  const c = server.admin();
  const host = newHost('host-a');
  const first = await onFirstConfig(c, host, poolYaml('worker', '  maxUnavailable: 1\n'), demoServiceConfig('good', { kernelArguments: 'a=1' }));
  const starts = agentStarts(host);

  // A kernel argument: the update reboots, and the hook runs before the reboot is asked for.
  await apply(c, hooksPool(`    beforeRebooting: [${sh('echo flushing the database; echo the database refuses >&2; exit 3')}]\n`, ''), demoServiceConfig('bad', { kernelArguments: 'a=2' }));
  const second = await target(c);
  const node = await untilNode(c, hosts, 'host-a', (n) => n.status!.state === 'Degraded', 90_000);
  assert.equal(node.status!.phase, 'hooks');
  assert.equal(node.status!.currentConfig, first);
  assert.equal(node.status!.desiredConfig, second);
  assert.equal(node.status!.reason, 'hooks: beforeRebooting[0] /bin/sh -c echo flushing the database; echo the database refuses >&2; exit 3: exited 3: flushing the database | the database refuses');
  // Nothing changed: the file is back, the staged deployment is gone, no reboot was asked for.
  assert.equal(host.file('etc/demo/motd'), 'good');
  assert.doesNotMatch(host.rpmOstree('kargs'), /a=2/);
  assert.match(host.rpmOstree('kargs'), /a=1/);
  assert.equal(agentStarts(host), starts, 'the host did not reboot');
  assert.equal(journalOf(host).pending, null);

  const last = (await history(c, 'host-a')).at(-1)!;
  assert.equal(last.toConfig, second);
  assert.equal(last.result, 'Degraded');
  assert.deepEqual(last.hooks.map((h) => [h.point, h.index, h.argv[0], h.exitStatus, h.result]), [['beforeRebooting', 0, '/bin/sh', 3, 'failed']]);
  assert.ok(last.hooks[0]!.durationMs >= 0);
  await eventually(async () => (await events(c, 'host-a')).some((e) => /^Warning HookFailed: update .* -> .*: hook beforeRebooting\[0\] \/bin\/sh -c echo flushing .* exited 3 after /.test(e)), 20_000, 'a HookFailed event');
});

test('a hook that hangs is killed at its timeout with its cgroup, and the node names the timeout', { skip }, async () => {
  server = await startTestServer();
  const c = server.admin();
  const host = newHost('host-b');
  const first = await onFirstConfig(c, host, poolYaml('worker', `  maxUnavailable: 1\n${noRebootPolicy}`));
  // A child that would outlive the shell: only killing the cgroup ends it.
  await apply(c, hooksPool(`    beforeUpdating: [${sh('echo started; sleep 600.4711 & exec sleep 600.4712', ', timeout: 2s')}]\n`), demoServiceConfig('changed'));
  const t0 = Date.now();
  const node = await untilNode(c, hosts, 'host-b', (n) => n.status!.state === 'Degraded', 90_000);
  const unit = 'mcplane-hook-host-b-before-updating-0.service';
  assert.equal(node.status!.reason, `hooks: beforeUpdating[0] /bin/sh -c echo started; sleep 600.4711 & exec sleep 600.4712: killed at its timeout of 2s (unit ${unit}): started`);
  assert.ok(Date.now() - t0 < scaled(60_000));
  assert.equal(processesMatching('sleep 600\\.471'), '', 'no process of the hook is left');
  assert.match(host.systemd.systemctl('show', '-p', 'LoadState', '-p', 'ActiveState', unit).stdout, /ActiveState=inactive/);
  assert.equal(host.systemd.systemctl('list-units', '--all', '--no-legend', 'mcplane-hook-*').stdout.trim(), '', 'the transient unit is gone');
  assert.equal(host.file('etc/demo/motd'), 'good', 'nothing changed');
  assert.equal(node.status!.currentConfig, first);
  const last = (await history(c, 'host-b')).at(-1)!;
  assert.deepEqual(last.hooks.map((h) => [h.point, h.exitStatus, h.result]), [['beforeUpdating', -1, 'timeout']]);
  assert.ok(last.hooks[0]!.durationMs >= 2000 && last.hooks[0]!.durationMs < scaled(30_000), `took ${last.hooks[0]!.durationMs} ms`);
});

test('a failing afterUpdating hook fails the update and the pool\'s onFailure Rollback reverts the node', { skip }, async () => {
  server = await startTestServer();
  const c = server.admin();
  const host = newHost('host-c');
  const motd = join(host.root, 'etc/demo/motd');
  const pool = hooksPool(`    afterUpdating: [${sh(`grep -q good ${motd} || { echo motd says: $(cat ${motd}); exit 5; }`)}]\n`,
    `  rollout: {maxFailures: 0, onFailure: Rollback}\n${noRebootPolicy}`);
  const first = await onFirstConfig(c, host, pool);

  await apply(c, demoServiceConfig('bad'));
  const second = await target(c);
  assert.notEqual(second, first);
  // The node fails on the hook; the pool goes back to the config every node reached, and the
  // agent undoes the failed update (update-undo.ts) to get there.
  await eventually(async () => (await history(c, 'host-c')).some((u) => u.toConfig === second && u.result === 'Degraded'), scaled(90_000), 'the update failed on its hook');
  const failed = (await history(c, 'host-c')).find((u) => u.toConfig === second && u.result === 'Degraded')!;
  assert.match(failed.reason, new RegExp(`^hooks: afterUpdating\\[0\\] /bin/sh -c grep -q good .*: exited 5: motd says: bad$`));
  assert.deepEqual(failed.hooks.map((h) => [h.point, h.exitStatus, h.result]), [['afterUpdating', 5, 'failed']]);
  await untilNode(c, hosts, 'host-c', (n) => n.status!.currentConfig === first && n.status!.desiredConfig === first && n.status!.state === 'Done', 90_000);
  assert.equal(await target(c), first, 'the pool rolled back');
  assert.equal(host.file('etc/demo/motd'), 'good');
});

test('`if` conditions skip actions whose paths the update does not change; the preview lists the hooks each node runs; every action is in the history', { skip }, async () => {
  server = await startTestServer();
  const c = server.admin();
  const host = newHost('host-d');
  const log = join(host.root, 'hook-log');
  const pool = hooksPool(`    beforeUpdating:
      - ${sh(`echo motd changes >> ${log}`, ', if: [/etc/demo/motd]')}
      - ${sh(`echo other changes >> ${log}`, ', if: ["/etc/other/**"]')}
    afterUpdating:
      - ${sh(`echo "$GREETING $MCPLANE_HOOK $(pwd) $MCPLANE_TO_CONFIG" >> ${log}`, ', env: {GREETING: hello}, workDir: /tmp')}
`);
  await onFirstConfig(c, host, poolYaml('worker', `  maxUnavailable: 1\n${noRebootPolicy}`));
  // A config of its own ships a hook too (mcplane.io/hooks): it runs after the pool's.
  const annotated = hooksConfig(`|\n      afterUpdating: [{run: [/bin/sh, -c, "echo from the config >> ${log}"]}]`);
  const manifests = [pool, demoServiceConfig('next'), annotated];
  const preview = await call(c, c.config.apply.bind(c.config), { manifests: manifests.map((text, i) => ({ source: `m${i}.yaml`, text })), dryRun: true }, 'apply');
  const expected = `beforeUpdating: /bin/sh -c echo motd changes >> ${log}; afterUpdating: /bin/sh -c echo "$GREETING $MCPLANE_HOOK $(pwd) $MCPLANE_TO_CONFIG" >> ${log}, /bin/sh -c echo from the config >> ${log}`;
  assert.equal(preview.nodePreviews.find((n) => n.node === 'host-d')!.hooks, expected);
  const dir = mkdtempSync(join(tmpdir(), 'mcplane-hooks-'));
  const files = manifests.map((text, i) => { const f = join(dir, `m${i}.yaml`); writeFileSync(f, text); return f; });
  const out = await cli('apply', ...files.flatMap((f) => ['-f', f]), '--dry-run');
  assert.equal(out.status, 0, out.stderr);
  assert.ok(out.stdout.includes(`\nHOOKS\nhost-d: ${expected}\n`), out.stdout);

  await apply(c, ...manifests);
  const second = await target(c);
  await untilNode(c, hosts, 'host-d', (n) => n.status!.currentConfig === second && n.status!.state === 'Done', 90_000);
  assert.equal(readFileSync(log, 'utf8'), `motd changes\nhello afterUpdating /tmp ${second}\nfrom the config\n`);
  const last = (await history(c, 'host-d')).at(-1)!;
  assert.equal(last.result, 'Done');
  assert.deepEqual(last.hooks.map((h) => [h.point, h.index, h.exitStatus, h.result]), [
    ['beforeUpdating', 0, 0, 'success'], ['beforeUpdating', 1, -1, 'skipped'], ['afterUpdating', 0, 0, 'success'], ['afterUpdating', 1, 0, 'success'],
  ]);
  await eventually(async () => (await events(c, 'host-d')).filter((e) => e.startsWith('Normal HookSucceeded:')).length === 3, 20_000, 'three HookSucceeded events');
  const described = await cli('describe', 'node', 'host-d');
  assert.equal(described.status, 0, described.stderr);
  assert.ok(described.stdout.includes(`    Hook:        beforeUpdating[0] /bin/sh -c echo motd changes >> ${log}: exited 0 after `), described.stdout);
  assert.ok(described.stdout.includes(`    Hook:        beforeUpdating[1] /bin/sh -c echo other changes >> ${log}: skipped (its if matched no changed path)\n`), described.stdout);
});

test('kill -9 after a beforeUpdating action passed: the restarted agent does not run it again; one killed mid-hook leaves no process behind', { skip }, async () => {
  server = await startTestServer();
  const c = server.admin();
  const host = newHost('host-e');
  const count = join(host.root, 'hook-count');
  const release = join(host.root, 'hook-release');
  await onFirstConfig(c, host, poolYaml('worker', `  maxUnavailable: 1\n${noRebootPolicy}`));
  await host.kill();
  await apply(c, hooksPool(`    beforeUpdating:
      - ${sh(`echo ran >> ${count}`)}
      - ${sh(`test -e ${release} || exec sleep 600.4713`, ', timeout: 1h')}
`), demoServiceConfig('next'));
  const second = await target(c);
  host.spawnAgent({ MCPLANE_FAILPOINT: 'hook-passed:0' });
  assert.equal(await host.exited(), -1, 'the failpoint killed the agent');
  assert.deepEqual(journalOf(host).pending.hooksPassed, ['beforeUpdating[0]']);
  assert.equal(journalOf(host).pending.step, 'before-updating');

  // Restarted: the first action is not run again; the second hangs, and the agent is killed in it.
  host.spawnAgent();
  await untilNode(c, hosts, 'host-e', (n) => n.status!.phase === 'hooks' && n.status!.reason.startsWith('running hook beforeUpdating[1]'), 60_000);
  await eventually(async () => processesMatching('sleep 600\\.4713') !== '', 20_000, 'the hook runs');
  await host.kill();
  assert.notEqual(processesMatching('sleep 600\\.4713'), '', 'systemd, not the agent, owns the hook: it survives the agent');
  writeFileSync(release, '');
  host.spawnAgent();
  await untilNode(c, hosts, 'host-e', (n) => n.status!.currentConfig === second && n.status!.state === 'Done', 60_000);
  assert.equal(processesMatching('sleep 600\\.4713'), '', 'the restarted agent stopped the unit it left');
  assert.equal(readFileSync(count, 'utf8'), 'ran\n', 'the action that passed ran once');
});
