// mcplane-server backup and restore (docs/backup-restore.md), through the real programs: a
// server process on SQLite with agents connected, an online backup taken while it serves, a
// change made after the backup, the server stopped, the backup restored into a new data
// directory and a server started on it. Every object and every node's assignment must be as
// they were at the backup, and the change after it gone. The server runs on SQLite whatever
// MCPLANE_TEST_STORE says: the command copies a SQLite file (etcd is backed up with etcdctl).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { connect, type Clients } from '../../src/cli/client/connection.ts';
import { ETCD_BINARY, freePort } from '../../sandbox/etcd-cluster.ts';
import { programArgs, REPO_ROOT, runAsync, type CliResult } from '../helpers/run-cli.ts';
import { spawnServer, type ServerProcess } from '../helpers/server-process.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { scaled } from '../helpers/time-scale.ts';
import { testPki } from '../helpers/test-pki.ts';

/** mcplane-server run as an operator runs it, for its offline verbs. */
function serverCommand(args: string[]): Promise<CliResult> {
  return runAsync(process.execPath, [...programArgs('mcplane-server'), ...args], { cwd: REPO_ROOT });
}

async function stop(server: ServerProcess): Promise<void> {
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0, 'the server stops cleanly');
}

/**
 * Everything the restore must bring back, read over the server's API: objects with their content
 * and resourceVersion, rendered configs, pools' specs and targets, each node's labels, pool and
 * configs, and bootstrap tokens. Connection state is left out (the agents are gone by then).
 */
async function fleet(c: Clients): Promise<Record<string, unknown>> {
  const nodes = (await call(c, c.status.listNodes.bind(c.status), {}, 'list nodes')).nodes;
  return {
    machineConfigs: (await call(c, c.config.listMachineConfigs.bind(c.config), {}, 'list mc')).machineConfigs,
    rendered: (await call(c, c.config.listRenderedConfigs.bind(c.config), {}, 'list rendered')).renderedConfigs.map((r) => r.name),
    pools: (await call(c, c.status.listPools.bind(c.status), {}, 'list pools')).pools.map((p) => ({
      name: p.name, spec: p.specJson, resourceVersion: p.resourceVersion, created: p.creationTimeUnixMs,
      configuration: p.status?.configuration, sources: p.status?.configurationSources,
    })),
    nodes: nodes.map((n) => ({
      name: n.name, labels: n.labels, pool: n.pool, registered: n.registrationTimeUnixMs,
      current: n.status?.currentConfig, desired: n.status?.desiredConfig, state: n.status?.state,
    })),
    tokens: (await call(c, c.identity.listBootstrapTokens.bind(c.identity), {}, 'list tokens')).tokens,
  };
}

test('an online backup, restored into a new data directory, brings back every object and node assignment', { timeout: scaled(120_000) }, async () => {
  const pki = await testPki();
  const work = mkdtempSync(join(tmpdir(), 'mcplane-backup-'));
  const first = join(work, 'data');
  const server = await spawnServer(['--data-dir', first, '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap']);
  const c = connect({ server: server.address, pkiDir: pki.dir, config: '/dev/null' });
  const agents: SimulatedAgent[] = [];
  let before: Record<string, unknown> | undefined;
  try {
    const examples = readdirSync(join(REPO_ROOT, 'examples')).map((f) => ({ source: f, text: readFileSync(join(REPO_ROOT, 'examples', f), 'utf8') }));
    await call(c, c.config.apply.bind(c.config), { manifests: examples, dryRun: false }, 'apply');
    for (const [name, pool] of [['w1', 'worker'], ['w2', 'worker'], ['i1', 'infra']] as const) {
      const agent = new SimulatedAgent({ address: server.address, tls: await pki.node(`backup-${name}`, pool), name: `backup-${name}`, autoDone: true });
      agents.push(agent);
      await agent.connect();
    }
    await call(c, c.config.labelNode.bind(c.config), { name: 'backup-w2', set: { 'example.com/rack': 'r7' }, remove: [] }, 'label');
    await call(c, c.identity.createBootstrapToken.bind(c.identity), { pool: 'infra', ttlMs: 86_400_000, description: 'kept' }, 'token');
    // Every node on its pool's config before the backup, so the fleet is still while it is read.
    await eventually(async () => {
      const nodes = (await call(c, c.status.listNodes.bind(c.status), {}, 'list nodes')).nodes;
      return nodes.length === 3 && nodes.every((n) => n.status?.desiredConfig && n.status.currentConfig === n.status.desiredConfig && n.status.state === 'Done');
    }, 30_000, 'every node Done on its config');
    before = await fleet(c);
    assert.equal((before.nodes as unknown[]).length, 3);

    const file = join(work, 'mcplane-backup.db');
    const backup = await serverCommand(['backup', '--data-dir', first, '--to', file]);
    assert.equal(backup.status, 0, backup.stderr);
    assert.match(backup.stdout, new RegExp(`^backed up \\d+ objects \\(revision \\d+\\) from ${first}/mcplane.db to ${file}\n$`));
    // A second backup to the same file, and a restore onto the running server's store (whatever
    // the flags), are refused.
    const [exists, busy] = await Promise.all([
      serverCommand(['backup', '--data-dir', first, '--to', file]),
      serverCommand(['restore', '--from', file, '--data-dir', first, '--force']),
    ]);
    assert.equal(exists.stderr, `mcplane-server: --to ${file} exists; give a new file name (a backup never overwrites one)\n`);
    assert.equal(busy.status, 1);
    assert.match(busy.stderr, /is open in a running mcplane-server: stop it first/);

    // After the backup: a change that the restore must take away.
    await call(c, c.config.apply.bind(c.config), { dryRun: false, manifests: [{ source: '99-after-backup.yaml', text: 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-after-backup\n  labels: {machineconfiguration.openshift.io/role: worker}\nspec:\n  kernelArguments: [after=backup]\n' }] }, 'apply');

    // A backup taken while commits land is one revision: the MachineConfigs applied one after
    // another are in it up to some point and none after, and nothing is newer than its revision.
    const mc = (i: number) => ({ source: `80-busy-${i}.yaml`, text: `apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 80-busy-${String(i).padStart(4, '0')}\n  labels: {machineconfiguration.openshift.io/role: infra}\nspec:\n  kernelArguments: [busy=${i}]\n` });
    let applying = true;
    const applied = (async () => {
      let i = 0;
      while (applying || i < 3) await call(c, c.config.apply.bind(c.config), { dryRun: false, manifests: [mc(i++)] }, 'apply');
      return i;
    })();
    const busyFile = join(work, 'busy-backup.db');
    const busyBackup = await serverCommand(['backup', '--data-dir', first, '--to', busyFile]);
    applying = false;
    const total = await applied;
    assert.equal(busyBackup.status, 0, busyBackup.stderr);
    const db = new DatabaseSync(busyFile, { readOnly: true });
    try {
      const names = (db.prepare("SELECT name FROM objects WHERE kind = 'MachineConfig' AND name LIKE '80-busy-%' ORDER BY name").all() as { name: string }[]).map((r) => r.name);
      assert.deepEqual(names, Array.from({ length: names.length }, (_, i) => `80-busy-${String(i).padStart(4, '0')}`), 'a prefix of the applies, no gaps');
      assert.ok(names.length <= total);
      const revision = (db.prepare("SELECT value FROM meta WHERE key = 'revision'").get() as { value: number }).value;
      const newest = (db.prepare('SELECT max(revision) AS r FROM objects').get() as { r: number }).r;
      assert.ok(newest <= revision, `no object (revision ${newest}) newer than the backup's revision ${revision}`);
    } finally {
      db.close();
    }
  } finally {
    for (const agent of agents) agent.close();
    c.close();
    await stop(server);
  }

  const second = join(work, 'restored');
  const restore = await serverCommand(['restore', '--from', join(work, 'mcplane-backup.db'), '--data-dir', second]);
  assert.equal(restore.status, 0, restore.stderr);
  assert.match(restore.stdout, /^restored \d+ objects \(revision \d+\) from .* to .*\/restored\/mcplane.db\n$/);
  const again = await serverCommand(['restore', '--from', join(work, 'mcplane-backup.db'), '--data-dir', second]);
  assert.match(again.stderr, /mcplane.db exists \(\d+ objects, revision \d+\); --force moves it aside/);
  const forced = await serverCommand(['restore', '--from', join(work, 'mcplane-backup.db'), '--data-dir', second, '--force']);
  assert.equal(forced.status, 0, forced.stderr);
  const aside = /the previous store is (\S+)$/m.exec(forced.stdout)?.[1];
  assert.ok(aside && existsSync(aside), forced.stdout);

  const restored = await spawnServer(['--data-dir', second, '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap']);
  try {
    const r = connect({ server: restored.address, pkiDir: pki.dir, config: '/dev/null' });
    try {
      const after = await fleet(r);
      assert.deepEqual(after, before!);
      const names = (after.machineConfigs as { name: string }[]).map((m) => m.name);
      assert.ok(!names.includes('99-after-backup'), 'the change made after the backup is not in it');
      assert.equal((after.nodes as unknown[]).length, 3);
      // The audit trail is in the store, so in the backup: the label made before it, not the
      // apply made after it.
      const audit = (await call(r, r.identity.listAuditRecords.bind(r.identity), { sinceUnixMs: 0, limit: 0 }, 'list audit')).records;
      assert.ok(audit.some((a) => a.method === 'ConfigService/LabelNode' && a.objects.some((o) => o.name === 'backup-w2') && a.result === 'OK'), 'the label before the backup is audited');
      assert.ok(!audit.some((a) => a.objects.some((o) => o.name === '99-after-backup')), 'the apply after the backup is not');
    } finally {
      r.close();
    }
  } finally {
    await stop(restored);
  }
});

/** One etcd member on loopback, started by this test so it can be started again on a restored data dir. */
async function startEtcd(name: string, dataDir: string, clientPort: number, peerPort: number): Promise<{ endpoint: string; stop(): Promise<void> }> {
  const peer = `http://127.0.0.1:${peerPort}`;
  const child = spawn(ETCD_BINARY, [
    `--name=${name}`, `--data-dir=${dataDir}`,
    `--listen-client-urls=http://127.0.0.1:${clientPort}`, `--advertise-client-urls=http://127.0.0.1:${clientPort}`,
    `--listen-peer-urls=${peer}`, `--initial-advertise-peer-urls=${peer}`, `--initial-cluster=${name}=${peer}`,
    '--initial-cluster-state=new', '--heartbeat-interval=50', '--election-timeout=500', '--logger=zap', '--log-level=warn',
  ], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr!.on('data', (d) => { log += d; });
  const exited = new Promise((r) => child.once('exit', r));
  const endpoint = `127.0.0.1:${clientPort}`;
  await eventually(() => etcdctl(['--endpoints', endpoint, 'endpoint', 'health']).then((r) => r.status === 0), 30_000, `etcd on ${dataDir} healthy (${log})`);
  return { endpoint, async stop() { child.kill('SIGTERM'); await exited; } };
}

function etcdctl(args: string[]): Promise<CliResult> {
  return runAsync('etcdctl', args, { env: { ...process.env, ETCDCTL_API: '3' } });
}

test('an etcd snapshot (etcdctl snapshot save), restored into a new member, brings back every object and node assignment', { timeout: scaled(120_000) }, async () => {
  const pki = await testPki();
  const work = mkdtempSync(join(tmpdir(), 'mcplane-etcd-backup-'));
  const etcd = await startEtcd('m0', join(work, 'm0.etcd'), await freePort(), await freePort());
  const snapshot = join(work, 'etcd-snapshot.db');
  let before: Record<string, unknown> | undefined;
  const agents: SimulatedAgent[] = [];
  const server = await spawnServer(['--store', `etcd://${etcd.endpoint}`, '--data-dir', join(work, 'data'), '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap']);
  const c = connect({ server: server.address, pkiDir: pki.dir, config: '/dev/null' });
  try {
    const examples = readdirSync(join(REPO_ROOT, 'examples')).map((f) => ({ source: f, text: readFileSync(join(REPO_ROOT, 'examples', f), 'utf8') }));
    await call(c, c.config.apply.bind(c.config), { manifests: examples, dryRun: false }, 'apply');
    for (const [name, pool] of [['w1', 'worker'], ['i1', 'infra']] as const) {
      const agent = new SimulatedAgent({ address: server.address, tls: await pki.node(`snap-${name}`, pool), name: `snap-${name}`, autoDone: true });
      agents.push(agent);
      await agent.connect();
    }
    await eventually(async () => {
      const nodes = (await call(c, c.status.listNodes.bind(c.status), {}, 'list nodes')).nodes;
      return nodes.length === 2 && nodes.every((n) => n.status?.desiredConfig && n.status.currentConfig === n.status.desiredConfig && n.status.state === 'Done');
    }, 30_000, 'every node Done on its config');
    before = await fleet(c);
    const save = await etcdctl(['--endpoints', etcd.endpoint, 'snapshot', 'save', snapshot]);
    assert.equal(save.status, 0, save.stderr);
    await call(c, c.config.apply.bind(c.config), { dryRun: false, manifests: [{ source: '99-after-snapshot.yaml', text: 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-after-snapshot\n  labels: {machineconfiguration.openshift.io/role: worker}\nspec:\n  kernelArguments: [after=snapshot]\n' }] }, 'apply');
  } finally {
    for (const agent of agents) agent.close();
    c.close();
    await stop(server);
    await etcd.stop();
  }

  // As docs/backup-restore.md says: a new data dir from the snapshot, a member started on it.
  const [clientPort, peerPort] = [await freePort(), await freePort()];
  const restoredDir = join(work, 'restored.etcd');
  const restore = await etcdctl(['snapshot', 'restore', snapshot, '--name', 'r0', '--data-dir', restoredDir,
    '--initial-cluster', `r0=http://127.0.0.1:${peerPort}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${peerPort}`]);
  assert.equal(restore.status, 0, restore.stderr);
  const restoredEtcd = await startEtcd('r0', restoredDir, clientPort, peerPort);
  const restored = await spawnServer(['--store', `etcd://${restoredEtcd.endpoint}`, '--data-dir', join(work, 'data2'), '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap']);
  const r = connect({ server: restored.address, pkiDir: pki.dir, config: '/dev/null' });
  try {
    const after = await fleet(r);
    assert.deepEqual(after, before!);
    assert.ok(!(after.machineConfigs as { name: string }[]).some((m) => m.name === '99-after-snapshot'), 'the change made after the snapshot is not in it');
  } finally {
    r.close();
    await stop(restored);
    await restoredEtcd.stop();
  }
});
