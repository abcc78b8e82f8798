// A node's update history and the cluster's events, through the real parts: a real agent on a
// sandboxed host (real systemd user manager, the rpm-ostree and reboot stand-ins), a real server
// over loopback mTLS, and mcctl as a separate process.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import type { WatchEvent__Output } from '../../src/runtime/generated/mcplane/v1/WatchEvent.ts';
import type { UpdateRecord__Output } from '../../src/runtime/generated/mcplane/v1/UpdateRecord.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { untilNode } from '../helpers/converge.ts';
import { brokenUnitConfig, mcYaml, poolYaml } from '../helpers/manifests.ts';
import { REPO_ROOT, runCliAsync } from '../helpers/run-cli.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
const NODE = 'hist-a';
let server: TestServer;
let c: Clients;
let host: SandboxHost;

// Files under /etc/demo/ need no reboot; a file under /etc/fail/ restarts a unit that fails.
const pool = poolYaml('worker', `  disruptionPolicy:
    files:
      - {path: /etc/demo/, actions: [{type: none}]}
      - {path: /etc/fail/, actions: [{type: restart, unit: broken.service}]}
    units:
      - {name: broken.service, actions: [{type: none}]}
`);
const base = brokenUnitConfig('50-demo', 'worker', '/etc/demo/motd', 'hello');
const kargs = mcYaml('60-kargs', 'worker', '  kernelArguments: [hugepages=16]\n');
const failing = mcYaml('70-fail', 'worker', '  config:\n    ignition: {version: 3.4.0}\n    storage: {files: [{path: /etc/fail/trigger, contents: {source: "data:,x"}}]}\n');

const apply = (text: string) => call(c, c.config.apply.bind(c.config), { manifests: [{ source: 't.yaml', text }], dryRun: false }, 'apply');
const target = async () => (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
const history = async (cl = c) => (await call(cl, cl.status.getNodeHistory.bind(cl.status), { name: NODE }, 'history')).updates;
const cli = (...args: string[]) => runCliAsync([...args, '-s', server.address, '--pki-dir', server.pki.dir]);
const names = (u: UpdateRecord__Output) => u.phases.map((p) => p.name);
/** This node's events as `<type> <reason>: <message>`, the most recent `limit` (0: all). */
const eventLines = async (limit = 0) => (await call(c, c.status.listEvents.bind(c.status), { node: NODE, pool: '', limit }, 'events')).events.map((e) => `${e.type} ${e.reason}: ${e.message}`);
/**
 * Waits until the leader has recorded what `seen` looks for. Events are derived by comparing what
 * the leader's cache shows from one pass to the next (passes are paced up to a second apart under
 * load): a state that is fixed the moment a test reads it can be gone before a pass saw it, so a
 * test that fixes a failure waits for its Warning first, as an operator would.
 */
async function untilEvents(what: string, seen: (lines: string[]) => boolean, limit = 0): Promise<void> {
  for (const end = Date.now() + 10_000; !seen(await eventLines(limit)); await new Promise((r) => setTimeout(r, 100))) {
    assert.ok(Date.now() < end, `no ${what} within 10 s; the events:\n${(await eventLines(limit)).join('\n')}`);
  }
}

before(async () => {
  if (skip) return;
  server = await startTestServer();
  c = server.admin();
  await apply(pool);
  await apply(base);
  host = new SandboxHost({ name: NODE, server: server.address, pki: server.pki });
  await host.start();
  const want = await target();
  await untilNode(c, [host], NODE, (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
});
after(async () => {
  if (skip) return;
  await host.stop();
  await server.close();
});

test('a rollout with a reboot: the history has every phase, and the reboot phase ends after the agent is back', { skip }, async () => {
  await apply(kargs);
  const want = await target();
  // Perform the reboot ourselves, to know when the agent went down.
  const deadline = Date.now() + 30_000;
  const requested = () => existsSync(host.rebootMarker) && readFileSync(host.rebootMarker, 'utf8').trim().split('\n').length > host.reboots;
  while (!requested()) {
    assert.ok(Date.now() < deadline, `no reboot requested\n${host.logs.slice(-10).join('\n')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const downAt = Date.now();
  assert.ok(await host.rebootIfRequested());
  await untilNode(c, [host], NODE, (n) => n.status!.currentConfig === want && n.status!.state === 'Done');

  let updates: UpdateRecord__Output[] = [];
  const until = Date.now() + 10_000;
  while ((updates = await history()).at(-1)?.toConfig !== want) {
    assert.ok(Date.now() < until, `the finished update never reached the history: ${JSON.stringify(updates)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(updates.length, 2, 'the first config and the kernel-argument change');
  const [first, second] = updates as [UpdateRecord__Output, UpdateRecord__Output];
  assert.equal(first.fromConfig, '');
  assert.equal(first.toConfig, second.fromConfig);
  assert.equal(first.result, 'Done');
  assert.equal(first.disruption, 'none');
  assert.deepEqual(names(first), ['check', 'diff', 'plan', 'apply', 'actions', 'validate']);

  assert.equal(second.toConfig, want);
  assert.equal(second.result, 'Done');
  assert.equal(second.reason, '');
  assert.equal(second.disruption, 'reboot: kernelArguments changed');
  assert.deepEqual(names(second), ['check', 'diff', 'plan', 'apply', 'reboot', 'validate']);
  const reboot = second.phases.find((p) => p.name === 'reboot')!;
  const validate = second.phases.find((p) => p.name === 'validate')!;
  assert.ok(reboot.startedUnixMs <= downAt, 'the reboot phase started before the host went down');
  assert.ok(reboot.endedUnixMs > downAt, `the reboot phase ended when the agent came back (${reboot.endedUnixMs}), after the host went down (${downAt})`);
  assert.ok(validate.startedUnixMs >= reboot.endedUnixMs);
  for (const u of updates) {
    for (const p of u.phases) assert.ok(p.startedUnixMs > 0 && p.endedUnixMs >= p.startedUnixMs, `${p.name}: ${p.startedUnixMs}..${p.endedUnixMs}`);
    assert.ok(u.endedUnixMs >= u.phases.at(-1)!.endedUnixMs);
  }
  const node = await call(c, c.status.getNode.bind(c.status), { name: NODE }, 'get');
  assert.equal(node.status!.lastUpdate?.id, second.id, 'the status carries the last finished update');
  assert.equal(node.status!.currentUpdate, null);
});

test('a failing update: a Degraded record naming the step; the fix is a new Done record', { skip }, async () => {
  const before = (await history()).length;
  await apply(failing);
  await untilNode(c, [host], NODE, (n) => n.status!.state === 'Degraded', 30_000);
  let updates: UpdateRecord__Output[] = [];
  const until = Date.now() + 10_000;
  while ((updates = await history()).length < before + 1) {
    assert.ok(Date.now() < until, 'the failed update never reached the history');
    await new Promise((r) => setTimeout(r, 100));
  }
  const failed = updates.at(-1)!;
  assert.equal(failed.result, 'Degraded');
  assert.match(failed.reason, /^actions: unit broken\.service: RestartUnit broken\.service/);
  assert.equal(names(failed).at(-1), 'actions', 'the step that failed is the last phase');
  assert.ok(failed.endedUnixMs > 0);

  await untilEvents('Degraded event', (lines) => lines.some((e) => /^Warning Degraded: .*actions: unit broken\.service/.test(e)));
  await call(c, c.config.delete.bind(c.config), { kind: 'MachineConfig', name: '70-fail' }, 'delete');
  const want = await target();
  await untilNode(c, [host], NODE, (n) => n.status!.currentConfig === want && n.status!.state === 'Done', 30_000);
  const fixed = await (async () => {
    for (const until2 = Date.now() + 10_000; Date.now() < until2; await new Promise((r) => setTimeout(r, 100))) {
      const u = (await history()).at(-1)!;
      if (u.id !== failed.id) return u;
    }
    throw new Error('the fixing update never reached the history');
  })();
  assert.equal(fixed.result, 'Done');
  assert.equal(fixed.toConfig, want);
  // The next test reads the events: the history is written as reports arrive, the events by the
  // leader's next pass.
  await untilEvents(`Recovered and UpdateDone -> ${want} events`, (lines) => lines.some((e) => e.startsWith(`Normal Recovered: the node is Done again on ${want}`))
    && lines.some((e) => e.startsWith('Normal UpdateDone: ') && e.includes(`-> ${want} `)));
});

test('mcctl get events --node lists assigned, phase and done events in order, with the failure as Warnings', { skip }, async () => {
  const r = await cli('get', 'events', '--node', NODE);
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trimEnd().split('\n');
  assert.match(lines[0]!, /^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE$/);
  const rows = lines.slice(1);
  assert.ok(rows.every((l) => l.includes(`node/${NODE}`)), r.stdout);
  const index = (re: RegExp, from = 0) => {
    const i = rows.findIndex((l, n) => n >= from && re.test(l));
    assert.ok(i >= 0, `no row matching ${re} after row ${from}:\n${r.stdout}`);
    return i;
  };
  // The kernel-argument update (the one that rebooted): assigned, its phases in order, then done.
  // Phases carry the agent's clock and the rest the leader's, so the assignment is only required
  // to be there, not to sort before the first phase.
  const reboot = index(/PhaseChanged\s+.*: reboot$/);
  const update = /update (\S+ -> \S+): reboot$/.exec(rows[reboot]!)![1]!;
  index(new RegExp(`Normal\\s+NodeAssigned\\s+node/hist-a\\s+assigned ${update.split(' -> ')[1]} \\(was rendered-worker-`));
  const check = rows.findIndex((l) => /Normal\s+PhaseChanged\s/.test(l) && l.endsWith(`update ${update}: check`));
  assert.ok(check >= 0 && check < reboot, `the update's check before its reboot:\n${r.stdout}`);
  const validate = index(new RegExp(`PhaseChanged\\s+.*update ${update}: validate$`), reboot + 1);
  index(/Normal\s+UpdateDone\s+.*\(disruption: reboot: kernelArguments changed\)$/, validate + 1);
  const failed = index(/Warning\s+UpdateFailed\s+.*-> rendered-worker-\S+ Degraded: actions: unit broken\.service/);
  const degraded = index(/Warning\s+Degraded\s+.*actions: unit broken\.service/);
  index(/Normal\s+Recovered\s+/, Math.max(failed, degraded) + 1);

  const json = await cli('get', 'events', '--node', NODE, '-o', 'json');
  assert.equal(json.status, 0, json.stderr);
  const list = JSON.parse(json.stdout) as { kind: string; items: { kind: string; type: string; reason: string; involvedObject: { kind: string; name: string }; count: number; lastTimestamp: string }[] };
  assert.equal(list.kind, 'List');
  assert.equal(list.items.length, rows.length);
  assert.ok(list.items.every((e) => e.kind === 'Event' && e.involvedObject.kind === 'Node' && e.involvedObject.name === NODE && e.count >= 1));
  const times = list.items.map((e) => Date.parse(e.lastTimestamp));
  assert.deepEqual(times, [...times].sort((a, b) => a - b), 'oldest first');

  const pools = await cli('get', 'events', '--pool', 'worker');
  assert.equal(pools.status, 0, pools.stderr);
  assert.match(pools.stdout, /Normal\s+ConfigRendered\s+pool\/worker\s+rendered rendered-worker-\S+ from \d+ MachineConfigs?/);
  assert.match(pools.stdout, /node\/hist-a/);
  const wrong = await cli('get', 'nodes', '--node', NODE);
  assert.equal(wrong.status, 1);
  assert.match(wrong.stderr, /--node filters events only/);
});

test('Watch delivers events as they happen', { skip }, async () => {
  const stream = c.status.watch({ pools: false, nodes: false, events: true });
  const received: WatchEvent__Output[] = [];
  let synced = false;
  const arrived = new Promise<WatchEvent__Output>((resolve, reject) => {
    stream.on('data', (e: WatchEvent__Output) => {
      received.push(e);
      if (e.type === 'SYNCED') synced = true;
      else if (synced && e.event?.reason === 'ConfigRendered') resolve(e);
    });
    stream.on('error', (err: Error) => { if (!/Cancelled/.test(err.message)) reject(err); });
  });
  while (!synced) await new Promise((r) => setTimeout(r, 20));
  assert.ok(received.every((e) => e.type === 'SYNCED' || (e.event && !e.pool && !e.node)), 'only events were asked for');
  assert.ok(received.some((e) => e.event?.reason === 'UpdateDone'), 'the snapshot holds the events so far');
  await apply(mcYaml('80-more', 'worker', '  config:\n    ignition: {version: 3.4.0}\n    storage: {files: [{path: /etc/demo/more, contents: {source: "data:,more"}}]}\n'));
  const e = await Promise.race([arrived, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no event within 10 s')), 10_000))]);
  stream.cancel();
  assert.equal(e.event!.object, 'pool/worker');
  assert.equal(e.event!.type, 'Normal');
  assert.match(e.event!.message, /80-more/);
  const want = await target();
  await untilNode(c, [host], NODE, (n) => n.status!.currentConfig === want && n.status!.state === 'Done', 30_000);
});

test('mcctl describe node ends with the update timeline', { skip }, async () => {
  const r = await cli('describe', 'node', NODE);
  assert.equal(r.status, 0, r.stderr);
  const timeline = r.stdout.slice(r.stdout.indexOf('Updates:'));
  assert.match(timeline, /^Updates:\s+5 kept, oldest first\n/, 'the first, the reboot, the failure, its fix and the Watch test\'s');
  assert.match(timeline, /\n {2}<none> -> rendered-worker-\S+\n {4}Result: +Done\n/);
  assert.match(timeline, /\n {4}Result: +Degraded: actions: unit broken\.service/);
  assert.match(timeline, /\n {4}Disruption: +reboot: kernelArguments changed\n/);
  assert.match(timeline, /\n {4}reboot +\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ +[\d.]+m?s\n/);
  assert.match(timeline, /\n {4}PHASE +STARTED +DURATION\n/);
});

test('mcctl get events -w prints the table, then each new event as a row', { skip }, async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'get', 'events', '-w', '--pool', 'worker', '-s', server.address, '--pki-dir', server.pki.dir], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  try {
    const until = async (re: RegExp) => {
      for (const end = Date.now() + 20_000; !re.test(out); await new Promise((r) => setTimeout(r, 50))) {
        assert.ok(Date.now() < end, `no ${re} in:\n${out}`);
      }
    };
    await until(/^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE\n/);
    const before = out.length;
    await apply(mcYaml('90-watch', 'worker', '  config:\n    ignition: {version: 3.4.0}\n    storage: {files: [{path: /etc/demo/watch, contents: {source: "data:,w"}}]}\n'));
    await until(/Normal\s+ConfigRendered\s+pool\/worker\s+rendered \S+ from \d+ MachineConfigs: .*90-watch/);
    assert.ok(out.lastIndexOf('90-watch') > before, 'the new event came after the table');
    const want = await target();
    await untilNode(c, [host], NODE, (n) => n.status!.currentConfig === want && n.status!.state === 'Done', 30_000);
    await until(/UpdateDone\s+node\/hist-a\s+updated \S+ -> \S+ in \d+s \(disruption: none\)\n(.|\n)*$/);
  } finally {
    child.kill();
  }
});

test('drift: a Warning when a managed file is edited, Degraded, and Recovered after a re-apply', { skip }, async () => {
  const { writeFileSync } = await import('node:fs');
  writeFileSync(`${host.root}/etc/demo/motd`, 'edited by hand');
  await untilNode(c, [host], NODE, (n) => n.status!.state === 'Degraded' && n.status!.drift.length > 0, 20_000);
  await untilEvents('DriftDetected and Degraded events', (lines) => lines.some((e) => e.startsWith('Warning DriftDetected: ')) && lines.some((e) => e.startsWith('Warning Degraded: drift: ')));
  await call(c, c.config.reapplyNode.bind(c.config), { name: NODE }, 'reapply');
  await untilNode(c, [host], NODE, (n) => n.status!.state === 'Done' && host.file('etc/demo/motd') === 'hello', 20_000);
  await untilEvents('Recovered event among the last 4', (lines) => lines.some((e) => e.startsWith('Normal Recovered: ')), 4);
  const events = (await call(c, c.status.listEvents.bind(c.status), { node: NODE, pool: '', limit: 0 }, 'events')).events;
  const drift = events.findIndex((e) => e.reason === 'DriftDetected');
  assert.ok(drift >= 0, events.map((e) => e.reason).join(' '));
  assert.equal(events[drift]!.type, 'Warning');
  assert.match(events[drift]!.message, /^drift: file \/etc\/demo\/motd$/);
  // Degraded comes from the node's status, DriftDetected from its drift list: which the leader
  // sees first depends on the status batches, and agent-dated phase events may fall in between.
  const degraded = events.findIndex((e) => e.reason === 'Degraded' && /^drift: /.test(e.message));
  assert.ok(degraded >= 0, events.map((e) => `${e.reason}: ${e.message}`).join('\n'));
  assert.ok(events.findLastIndex((e) => e.reason === 'Recovered') > Math.max(drift, degraded));
});

test('bad requests for events and history are refused, naming the field and the rule', { skip }, async () => {
  await assert.rejects(call(c, c.status.listEvents.bind(c.status), { node: '', pool: '', limit: -1 }, 'list events'), /limit: limit must be 0 \(every event kept\) or more, not -1/);
  await assert.rejects(call(c, c.status.getNodeHistory.bind(c.status), { name: 'no-such-node' }, 'history'), /Node\/no-such-node not found/);
});

test('the history survives a server restart on the same store', { skip }, async () => {
  const kept = await history();
  assert.equal(kept.length, 7, 'with the re-apply after the drift');
  await host.kill();
  const allEvents = async () => (await call(c, c.status.listEvents.bind(c.status), { node: '', pool: '', limit: 0 }, 'events')).events.map((e) => `${e.name} x${e.count}`);
  await new Promise((r) => setTimeout(r, 300));
  const eventsBefore = await allEvents();
  await server.close();
  server = await startTestServer({ dataDir: server.dataDir });
  c = server.admin();
  assert.deepEqual(await history(), kept);
  await new Promise((r) => setTimeout(r, 500));
  assert.deepEqual(await allEvents(), eventsBefore, 'the new leader reports changes from now on, not the old ones again');
  const events = (await call(c, c.status.listEvents.bind(c.status), { node: NODE, pool: '', limit: 3 }, 'events')).events;
  assert.equal(events.length, 3, 'events are stored too, and limit keeps the most recent');
  assert.equal(JSON.parse(readFileSync(`${host.stateDir}/journal.json`, 'utf8')).lastUpdate.id, kept.at(-1)!.id, 'the agent\'s journal holds the last one');
});
