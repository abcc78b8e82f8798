// Drift policies beyond Degrade, each through real agents (sandbox hosts under a real systemd
// user manager), the real server and mcctl: Adopt keeps a hand-edited file and proposes it as a
// MachineConfig that converges the pool when applied; driftIgnore watches a path for nothing;
// Reconcile against a file rewritten in a loop rewrites it a bounded number of times, then
// degrades naming the path, with each rewrite in the node's history and events.

import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { startOnPoolTarget, untilNode } from '../helpers/converge.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { sandboxFixture } from '../helpers/sandbox-fixture.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { scaled } from '../helpers/time-scale.ts';

const cli = (...args: string[]) => runCliAsync([...args, '-s', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null']);

const pool = (name: string, extra: string) => poolYaml(name, `  maxUnavailable: 100%
  disruptionPolicy:
    files: [{path: /etc/, actions: [{type: none}]}]
${extra}`);
const files = (role: string, ...entries: string[]) => mcYaml(`50-${role}`, role, `  config:\n    ignition: {version: 3.4.0}\n    storage:\n      files:\n${entries.map((e) => `        - ${e}\n`).join('')}`);
const { skip, server, c, systemd, hosts, apply, target } = sandboxFixture({
  sharedSystemd: true,
  setUp: async () => {
    await apply(
      pool('adopt', '  driftPolicy: Adopt\n'),
      files('adopt', '{path: /etc/adopt/chrony.conf, mode: 0644, contents: {source: "data:,server%20a.example%0A"}}', '{path: /etc/adopt/secret.conf, mode: 0600, contents: {source: "data:,s1"}}'),
      pool('ignore', '  driftIgnore: [/etc/ignored/*.conf, /etc/hand-managed/]\n'),
      files('ignore', '{path: /etc/ignored/local.conf, contents: {source: "data:,managed"}}', '{path: /etc/hand-managed/deep/x, contents: {source: "data:,managed"}}', '{path: /etc/watched.conf, contents: {source: "data:,managed"}}'),
      pool('loop', '  driftPolicy: Reconcile\n'),
      files('loop', '{path: /etc/looped.conf, contents: {source: "data:,expected"}}'),
    );
  },
});

async function hostIn(p: string, name: string, config: Record<string, unknown> = {}): Promise<SandboxHost> {
  return startOnPoolTarget(c, hosts, new SandboxHost({ name, server: server.address, pki: server.pki, pool: p, systemd, labels: { [`node-role.kubernetes.io/${p}`]: '' }, config }), p);
}

test('driftPolicy Adopt: a hand-edited file stays, the node stays Done (Drifted), and the proposal applied converges the pool with no drift', { skip }, async () => {
  const host = await hostIn('adopt', 'adopt-0');
  const edited = 'server ntp.internal.example iburst\n';
  const path = join(host.root, 'etc/adopt/chrony.conf');
  writeFileSync(path, edited);
  chmodSync(path, 0o664);
  writeFileSync(join(host.root, 'etc/adopt/secret.conf'), 's2'); // 0600: its content is withheld

  const node = await untilNode(c, [host], 'adopt-0', (n) => n.status!.drift.length === 2 && !!n.status!.drifted, 10_000);
  assert.equal(node.status!.state, 'Done', 'Adopt keeps the node Done');
  assert.equal(node.status!.driftPolicy, 'Adopt');
  assert.equal(node.status!.drifted!.type, 'Drifted');
  assert.equal(node.status!.drifted!.status, 'True');
  assert.match(node.status!.drifted!.message, /\/etc\/adopt\/chrony\.conf/);
  assert.equal(host.file('etc/adopt/chrony.conf'), edited, 'the node keeps its version');
  // Lists and watches carry no content: the proposal does.
  assert.ok(node.status!.drift.every((d) => d.contentBase64 === ''));

  const listed = await cli('get', 'drift', '-o', 'wide');
  assert.equal(listed.status, 0, listed.stderr);
  assert.match(listed.stdout, /^NODE\s+POOL\s+POLICY\s+STATE\s+PATHS\s+DETECTED\s+ADOPTABLE/m);
  assert.match(listed.stdout, /adopt-0\s+adopt\s+Adopt\s+Done\s+\/etc\/adopt\/chrony\.conf,\/etc\/adopt\/secret\.conf\s+\S+\s+1\/2/);

  const adopted = await cli('drift', 'adopt', 'adopt-0', '-o', 'yaml');
  assert.equal(adopted.status, 0, adopted.stderr);
  assert.match(adopted.stderr, /not in the proposal: file \/etc\/adopt\/secret\.conf: content withheld: file mode 0600 on the node/);
  assert.match(adopted.stdout, /^kind: MachineConfig$/m);
  assert.match(adopted.stdout, /name: 99-adopt-adopted-adopt-0/);
  assert.match(adopted.stdout, /machineconfiguration\.openshift\.io\/role: adopt/);
  assert.match(adopted.stdout, /mode: 436/, 'mode 0664 as on the node');
  assert.match(adopted.stdout, /user:\n\s+id: 0/);
  assert.ok(adopted.stdout.includes(`source: data:;base64,${Buffer.from(edited).toString('base64')}`), adopted.stdout);
  assert.ok(!adopted.stdout.includes('secret'), 'nothing of the withheld file');

  const dir = mkdtempSync(join(tmpdir(), 'adopt-'));
  try {
    writeFileSync(join(dir, 'mc.yaml'), adopted.stdout);
    const applied = await cli('apply', '-f', join(dir, 'mc.yaml'));
    assert.equal(applied.status, 0, applied.stderr);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const want = await target('adopt');
  // The node's version of the adopted file is the pool's now; the update put the file it could
  // not adopt back as the config has it. No drift is left, and no Drifted condition.
  const converged = await untilNode(c, [host], 'adopt-0', (n) => n.status!.currentConfig === want && n.status!.state === 'Done', 30_000);
  await new Promise((r) => setTimeout(r, scaled(1500))); // a full comparison (1 s) after the update
  const clean = await call(c, c.status.getNode.bind(c.status), { name: 'adopt-0' }, 'get');
  assert.deepEqual(clean.status!.drift, [], JSON.stringify(clean.status!.drift));
  assert.equal(clean.status!.drifted, null);
  assert.equal(clean.status!.state, 'Done');
  assert.equal(converged.status!.lastUpdate!.result, 'Done');
  assert.equal(host.file('etc/adopt/chrony.conf'), edited);
  assert.equal((statSync(path).mode & 0o777).toString(8), '664');
  assert.equal(host.file('etc/adopt/secret.conf'), 's1');
  const none = await cli('get', 'drift');
  assert.equal(none.status, 0, none.stderr);
  assert.doesNotMatch(none.stdout, /adopt-0/);
  await host.kill();
});

test('spec.driftIgnore: a hand-edited ignored file is watched for nothing (no drift, node Done); a path not ignored still drifts', { skip }, async () => {
  const host = await hostIn('ignore', 'ignore-0');
  writeFileSync(join(host.root, 'etc/ignored/local.conf'), 'edited by hand');
  writeFileSync(join(host.root, 'etc/hand-managed/deep/x'), 'edited by hand');
  // Two full comparisons (1 s each) and inotify's moment: anything reported would be by now.
  await new Promise((r) => setTimeout(r, scaled(2500)));
  const quiet = await call(c, c.status.getNode.bind(c.status), { name: 'ignore-0' }, 'get');
  assert.deepEqual(quiet.status!.drift, []);
  assert.equal(quiet.status!.state, 'Done');
  assert.equal(host.file('etc/ignored/local.conf'), 'edited by hand', 'not rewritten');

  writeFileSync(join(host.root, 'etc/watched.conf'), 'edited by hand');
  const degraded = await untilNode(c, [host], 'ignore-0', (n) => n.status!.state === 'Degraded', 10_000);
  assert.deepEqual(degraded.status!.drift.map((d) => d.path), ['/etc/watched.conf']);
  await host.kill();
});

test('driftIgnore entries are checked, each error naming the pool, the entry and the rule', { skip }, async () => {
  const bad = pool('bad-ignore', '  driftIgnore: [etc/motd, "/etc/**x/y", "/etc/[ab", /etc/motd, /etc/motd]\n');
  await assert.rejects(apply(bad), (err: Error) => {
    assert.match(err.message, /MachineConfigPool\/bad-ignore: spec\.driftIgnore\[0\]: "etc\/motd" is not an absolute path/);
    assert.match(err.message, /spec\.driftIgnore\[1\]: "\/etc\/\*\*x\/y": "\*\*" must be a whole path segment/);
    assert.match(err.message, /spec\.driftIgnore\[2\]: "\/etc\/\[ab": the "\[" at "\[ab" is never closed/);
    assert.match(err.message, /spec\.driftIgnore\[4\]: "\/etc\/motd" is listed twice \[duplicate\]/);
    return true;
  });
});

test('driftPolicy Reconcile against a file rewritten in a loop: bounded rewrites with backoff, then Degraded naming the path; history and events show each rewrite', { skip }, async () => {
  const host = await hostIn('loop', 'loop-0', { drift: { intervalSeconds: 1, reconcileMaxRewrites: 3, reconcileBackoffSeconds: 0.5, reconcileWindowSeconds: 600 } });
  const path = join(host.root, 'etc/looped.conf');
  // A process on the host that keeps writing its own version (a stand-in for a config manager
  // fighting the agent): a shell loop, 10 writes a second.
  const loop: ChildProcess = spawn('sh', ['-c', `while :; do printf looped > '${path}.tmp' && mv -f '${path}.tmp' '${path}'; sleep 0.1; done`], { stdio: 'ignore' });
  try {
    // A rewrite the loop overtakes fails its validation (Degraded, phase validate) for a moment;
    // giving up is Degraded in phase drift.
    const degraded = await untilNode(c, [host], 'loop-0', (n) => n.status!.state === 'Degraded' && n.status!.phase === 'drift', 60_000);
    assert.equal(degraded.status!.phase, 'drift');
    assert.match(degraded.status!.reason, /^drift: \/etc\/looped\.conf keeps changing: rewritten 3 times in \d+s and changed again after each; driftPolicy Reconcile stopped rewriting/);
    assert.match(degraded.status!.reason, /spec\.driftIgnore/);
    // Given up: no more rewrites while the loop goes on.
    await new Promise((r) => setTimeout(r, scaled(2000)));
    const history = await call(c, c.status.getNodeHistory.bind(c.status), { name: 'loop-0' }, 'history');
    const rewrites = history.updates.filter((u) => u.cause);
    assert.equal(rewrites.length, 3, JSON.stringify(history.updates.map((u) => [u.result, u.cause])));
    rewrites.forEach((u, i) => {
      // A rewrite the loop overtook before its validation failed; it counted all the same.
      assert.ok(['Done', 'Degraded', 'RolledBack'].includes(u.result), u.result);
      assert.equal(u.fromConfig, u.toConfig);
      assert.match(u.cause, new RegExp(`^drift: driftPolicy Reconcile rewrote /etc/looped\\.conf \\(rewrite ${i + 1} of at most 3 in 600s\\)$`));
    });
    // The backoff: each rewrite waited longer than the one before (0.5 s, then 1 s).
    assert.ok(rewrites[1]!.startedUnixMs - rewrites[0]!.startedUnixMs >= 450, 'the second rewrite waited');
    assert.ok(rewrites[2]!.startedUnixMs - rewrites[1]!.startedUnixMs >= 950, 'the third rewrite waited twice as long');
    await eventually(async () => {
      const { events: items } = await call(c, c.status.listEvents.bind(c.status), { node: 'loop-0', pool: '', limit: 0 }, 'events');
      const reconciled = items.filter((e) => e.reason === 'DriftReconciled');
      return reconciled.length >= 1 && reconciled.every((e) => /\/etc\/looped\.conf/.test(e.message))
        && items.some((e) => e.reason === 'Degraded' && /keeps changing/.test(e.message));
    }, 10_000, 'DriftReconciled and Degraded events');
    const events = await cli('get', 'events', '--node', 'loop-0');
    assert.match(events.stdout, /DriftReconciled\s+.*drift: driftPolicy Reconcile rewrote \/etc\/looped\.conf/);
    const described = await cli('describe', 'node', 'loop-0');
    assert.match(described.stdout, /Cause:\s+drift: driftPolicy Reconcile rewrote \/etc\/looped\.conf \(rewrite 3 of at most 3/);
  } finally {
    const exited = new Promise((r) => loop.once('exit', r));
    if (loop.exitCode === null) loop.kill('SIGKILL');
    await exited;
  }
  assert.equal(readFileSync(path, 'utf8'), 'looped');
  await host.kill();
});

test("a pool's driftIgnore and driftPolicy changed while its node is Done reach the agent at once, with no new config", { skip }, async () => {
  await apply(pool('later', ''), files('later', '{path: /etc/later/a.conf, contents: {source: "data:,a"}}', '{path: /etc/later/b.conf, contents: {source: "data:,b"}}'));
  const host = await hostIn('later', 'later-0');
  const config = await target('later');
  await apply(pool('later', '  driftPolicy: Adopt\n  driftIgnore: [/etc/later/a.conf]\n'));
  await eventually(async () => host.logs.some((l) => /drift settings changed/.test(l)), 20_000, 'the agent took the pool\'s new drift settings');
  writeFileSync(join(host.root, 'etc/later/a.conf'), 'edited by hand');
  writeFileSync(join(host.root, 'etc/later/b.conf'), 'edited by hand');
  const node = await untilNode(c, [host], 'later-0', (n) => n.status!.drift.length > 0 && !!n.status!.drifted, 10_000);
  assert.deepEqual(node.status!.drift.map((d) => d.path), ['/etc/later/b.conf'], 'a.conf is ignored');
  assert.equal(node.status!.state, 'Done');
  assert.equal(node.status!.driftPolicy, 'Adopt');
  assert.equal(node.status!.currentConfig, config, 'no new config was needed');
  await host.kill();
});

test('Degrade, then the drifted path added to driftIgnore: the node is Done again with the hand edit kept and no drift listed, without mcctl node reapply', { skip }, async () => {
  await apply(pool('forgiven', ''), files('forgiven', '{path: /etc/forgiven/a.conf, contents: {source: "data:,managed"}}'));
  const host = await hostIn('forgiven', 'forgiven-0');
  writeFileSync(join(host.root, 'etc/forgiven/a.conf'), 'edited by hand');
  await untilNode(c, [host], 'forgiven-0', (n) => n.status!.state === 'Degraded' && n.status!.drift.length > 0, 10_000);
  await apply(pool('forgiven', '  driftIgnore: [/etc/forgiven/a.conf]\n'));
  const node = await untilNode(c, [host], 'forgiven-0', (n) => n.status!.state === 'Done', 20_000);
  assert.deepEqual(node.status!.drift, []);
  assert.equal(host.file('etc/forgiven/a.conf'), 'edited by hand', 'ignored, not rewritten');
  await host.kill();
});

test('a message that changes only what the update engine does not run with (driftIgnore of another path) does not re-apply a node Degraded by drift: the hand edit stays until mcctl node reapply', { skip }, async () => {
  await apply(pool('kept', ''), files('kept', '{path: /etc/kept/a.conf, contents: {source: "data:,managed"}}'));
  const host = await hostIn('kept', 'kept-0');
  writeFileSync(join(host.root, 'etc/kept/a.conf'), 'edited by hand');
  await untilNode(c, [host], 'kept-0', (n) => n.status!.state === 'Degraded' && n.status!.drift.length > 0, 10_000);
  await apply(pool('kept', '  driftIgnore: [/etc/kept/other.conf]\n'));
  await eventually(async () => host.logs.some((l) => /drift settings changed/.test(l)), 20_000, 'the agent took the pool\'s new driftIgnore');
  // A re-apply (what Degrade leaves to an operator) would have rewritten the file by now.
  await new Promise((r) => setTimeout(r, scaled(3000)));
  assert.equal(host.file('etc/kept/a.conf'), 'edited by hand', 'not re-applied');
  const node = await untilNode(c, [host], 'kept-0', (n) => n.status!.state === 'Degraded', 10_000);
  assert.deepEqual(node.status!.drift.map((d) => d.path), ['/etc/kept/a.conf']);
  const reapplied = await cli('node', 'reapply', 'kept-0');
  assert.equal(reapplied.status, 0, reapplied.stderr);
  await untilNode(c, [host], 'kept-0', (n) => n.status!.state === 'Done', 30_000);
  assert.equal(host.file('etc/kept/a.conf'), 'managed');
  await host.kill();
});
