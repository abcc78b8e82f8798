// mcplane-server's /metrics over real HTTP, against a real control plane (mTLS gRPC, real store)
// with simulated agents: the pool counts equal the StatusService's, phases are timed from the
// agents' reports, the rollout has an ETA while it runs and none after, and a non-loopback
// address is refused unless the operator opts in.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { startServer } from '../../src/controlplane/server.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { sample, samples, scrape } from '../helpers/prometheus-text.ts';
import { REPO_ROOT } from '../helpers/run-cli.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { scaled } from '../helpers/time-scale.ts';
import { serverPerTest } from '../helpers/server-fixture.ts';

const { server, agents, start: startTestServer } = serverPerTest();

const karg = (value: string) => ({ source: 'karg.yaml', text: mcYaml('50-karg', 'worker', `  kernelArguments: [${value}]\n`) });

test('/metrics: MCO\'s pool counts equal the pool status, node states, agents, phase durations, render, store and leader', async () => {
  await startTestServer({ metrics: { listen: '127.0.0.1:0' } });
  const url = `http://127.0.0.1:${server.handle.metricsPort}/metrics`;
  const c = server.admin();
  const apply = (m: { source: string; text: string }) => call(c, c.config.apply.bind(c.config), { manifests: [m], dryRun: false }, 'apply');
  await apply({ source: 'pool.yaml', text: poolYaml('worker', '  maxUnavailable: 1\n') });
  for (const name of ['node-a', 'node-b', 'node-c']) {
    const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name), name, autoDone: true, doneAfterMs: 250 });
    await agent.connect();
    agents.push(agent);
  }
  // New nodes take the pool's first config at once; the rollout measured below starts after.
  const first = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  await eventually(() => agents.every((a) => a.status.currentConfig === first && a.status.state === 'Done'), 20_000, 'first config');
  const appliesBefore = sample(await scrape(url), 'mcplane_update_phase_duration_seconds_count', { phase: 'apply' }) ?? 0;
  const applySumBefore = sample(await scrape(url), 'mcplane_update_phase_duration_seconds_sum', { phase: 'apply' }) ?? 0;
  // The rollout below is driven by hand, one node at a time (~250 ms in apply each), so that it is
  // surely under way while the ETA is scraped: left to run by itself on a loaded machine, it
  // could end between two scrapes.
  for (const a of agents) a.options.autoDone = false;
  await apply(karg('a=1'));
  const target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  const nextAssigned = async (): Promise<SimulatedAgent> => {
    let next: SimulatedAgent | undefined;
    await eventually(() => (next = agents.find((a) => a.lastAssignment?.renderedConfig === target && a.status.currentConfig !== target)) !== undefined, 20_000, 'the next node assigned');
    return next!;
  };
  const update = async (a: SimulatedAgent): Promise<void> => {
    a.report({ desiredConfig: target, state: 'Working', phase: 'apply' });
    await new Promise((r) => setTimeout(r, 250));
    a.report({ currentConfig: target, desiredConfig: target, state: 'Done', phase: 'done' });
  };
  await update(await nextAssigned());
  const second = await nextAssigned();

  // While the rollout runs (one node done, the next assigned): an ETA.
  let eta: number | undefined;
  await eventually(async () => {
    const m = await scrape(url);
    const updated = sample(m, 'mco_updated_machine_count', { pool: 'worker' })!;
    eta = sample(m, 'mcplane_pool_rollout_eta_seconds', { pool: 'worker' });
    return eta !== undefined && updated < 3;
  }, 20_000, 'an ETA during the rollout');
  assert.ok(eta! > 0 && eta! < 30, `ETA ${eta} s for at most 3 nodes of ~0.25 s each`);
  await update(second);
  await update(await nextAssigned());

  await eventually(() => agents.every((a) => a.status.currentConfig === target && a.status.state === 'Done'), 20_000, 'rollout');
  await eventually(async () => sample(await scrape(url), 'mco_updated_machine_count', { pool: 'worker' }) === 3, 10_000, 'counts scraped');

  const m = await scrape(url);
  const pool = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!;
  assert.equal(sample(m, 'mco_machine_count', { pool: 'worker' }), pool.machineCount);
  assert.equal(sample(m, 'mco_updated_machine_count', { pool: 'worker' }), pool.updatedMachineCount);
  assert.equal(sample(m, 'mco_degraded_machine_count', { pool: 'worker' }), pool.degradedMachineCount);
  assert.equal(sample(m, 'mco_unavailable_machine_count', { pool: 'worker' }), pool.unavailableMachineCount);
  assert.equal(sample(m, 'mcplane_ready_machine_count', { pool: 'worker' }), pool.readyMachineCount);
  assert.equal(pool.machineCount, 3);
  assert.equal(sample(m, 'mco_machine_count', { pool: 'master' }), 0);
  assert.equal(sample(m, 'mcplane_pool_rollout_progress_ratio', { pool: 'worker' }), 1);
  assert.equal(sample(m, 'mcplane_pool_rollout_eta_seconds', { pool: 'worker' }), undefined, 'no ETA once nothing rolls out');
  assert.equal(sample(m, 'mcplane_nodes', { pool: 'worker', state: 'Done' }), 3);
  assert.equal(sample(m, 'mcplane_nodes', { pool: 'worker', state: 'Degraded' }), 0);
  assert.equal(sample(m, 'mcplane_agents_connected', { pool: 'worker' }), 3);
  assert.equal(sample(m, 'mcplane_pool_degraded', { pool: 'worker' }), 0);
  assert.equal(sample(m, 'mcplane_pool_render_degraded', { pool: 'worker' }), 0);
  // Each node spent ~250 ms in apply, reported by its agent to this replica.
  const applyCount = sample(m, 'mcplane_update_phase_duration_seconds_count', { phase: 'apply' })! - appliesBefore;
  const applySum = sample(m, 'mcplane_update_phase_duration_seconds_sum', { phase: 'apply' })! - applySumBefore;
  assert.equal(applyCount, 3);
  assert.ok(applySum >= 3 * 0.2 && applySum < 3 * 5, `apply took ${applySum} s in all`);
  assert.ok(sample(m, 'mcplane_render_duration_seconds_count', { result: 'ok' })! >= 2);
  assert.ok(sample(m, 'mcplane_renders_total', { result: 'ok' })! >= 2);
  const backend = process.env.MCPLANE_TEST_STORE === 'etcd' ? 'etcd' : 'sqlite';
  assert.ok(sample(m, 'mcplane_store_request_duration_seconds_count', { backend, operation: 'commit' })! > 0);
  assert.ok(sample(m, 'mcplane_store_request_duration_seconds_count', { backend, operation: 'list' })! >= 1);
  assert.equal(sample(m, 'mcplane_leader'), 1);
  assert.equal(sample(m, 'mcplane_replicas'), 1);
  // Every series says which replica answered.
  const replica = server.handle.controlPlane.replica.name;
  assert.ok(m.every((s) => s.labels.replica === replica), 'replica label on every series');
  assert.ok(sample(m, 'mcplane_server_process_resident_memory_bytes')! > 0);

  // The seam the leader's drain uses.
  server.handle.controlPlane.metrics.observePhase('drain', 42);
  assert.equal(sample(await scrape(url), 'mcplane_update_phase_duration_seconds_sum', { phase: 'drain' }), 42);

  // A node stuck in a phase has a clock; a degraded one counts as degraded; drift is counted.
  agents[0]!.report({ state: 'Working', phase: 'validate' });
  agents[1]!.report({ state: 'Degraded', phase: 'drift', reason: 'drift: /etc/x changed', drift: [{ path: '/etc/x', kind: 'file', expectedHash: 'a', actualHash: 'b', detectedUnixMs: Date.now() }] });
  await eventually(async () => sample(await scrape(url), 'mco_degraded_machine_count', { pool: 'worker' }) === 1, 10_000, 'degraded counted');
  await new Promise((r) => setTimeout(r, 300));
  const later = await scrape(url);
  const stuck = samples(later, 'mcplane_node_phase_seconds');
  assert.equal(stuck.length, 1, JSON.stringify(stuck));
  assert.deepEqual({ node: stuck[0]!.labels.node, pool: stuck[0]!.labels.pool, phase: stuck[0]!.labels.phase }, { node: 'node-a', pool: 'worker', phase: 'validate' });
  assert.ok(stuck[0]!.value >= 0.25, `in validate for ${stuck[0]!.value} s`);
  assert.equal(sample(later, 'mcplane_nodes', { pool: 'worker', state: 'Working' }), 1);
  assert.equal(sample(later, 'mcplane_nodes_drifted', { pool: 'worker' }), 1);
  assert.equal(sample(later, 'mcplane_pool_degraded', { pool: 'worker' }), 1);

  // An agent that goes away is no longer connected.
  agents[2]!.close();
  await eventually(async () => sample(await scrape(url), 'mcplane_agents_connected', { pool: 'worker' }) === 2, 10_000, 'disconnect seen');

  // Only /metrics, only GET.
  assert.equal((await fetch(url.replace('/metrics', '/'))).status, 404);
  assert.equal((await fetch(url, { method: 'POST' })).status, 405);
});

test('--metrics-listen: a non-loopback address is refused at start-up unless --metrics-allow-non-loopback is given', async () => {
  const run = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'src/controlplane/main.ts', '--insecure', '--listen', '127.0.0.1:0', '--data-dir', '/nonexistent/never-created', ...args], { cwd: REPO_ROOT, encoding: 'utf8', timeout: scaled(30_000) });
  const refused = run('--metrics-listen', '0.0.0.0:9624');
  assert.notEqual(refused.status, 0);
  assert.match(refused.stderr, /--metrics-listen 0\.0\.0\.0:9624: \/metrics is plain HTTP without authentication and listens only on a loopback address .* unless --metrics-allow-non-loopback is also given/);
  const orphan = run('--metrics-allow-non-loopback');
  assert.notEqual(orphan.status, 0);
  assert.match(orphan.stderr, /--metrics-allow-non-loopback needs --metrics-listen HOST:PORT/);
  const bad = run('--metrics-listen', 'localhost');
  assert.match(bad.stderr, /--metrics-listen: "localhost" is not HOST:PORT/);

  // With the opt-in, it serves on every address.
  const { mkdtempSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const handle = await startServer({ dataDir: mkdtempSync(join(tmpdir(), 'mcplane-metrics-')), listen: '127.0.0.1:0', insecure: true, metrics: { listen: '0.0.0.0:0', allowNonLoopback: true }, log: (await import('../../src/runtime/logger.ts')).createLogger({ level: 'silent' }) });
  try {
    const res = await fetch(`http://127.0.0.1:${handle.metricsPort}/metrics`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /^mcplane_leader\{replica="[^"]+"\} 1$/m);
  } finally {
    await handle.close(500);
  }
});

test('a reboot is timed from the agent\'s last report before it to its registration after it (the session record shows first)', async () => {
  await startTestServer({ metrics: { listen: '127.0.0.1:0' } });
  const url = `http://127.0.0.1:${server.handle.metricsPort}/metrics`;
  const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('rebooter'), name: 'rebooter' });
  agents.push(agent);
  await agent.connect();
  agent.report({ state: 'Working', phase: 'reboot' });
  await eventually(async () => samples(await scrape(url), 'mcplane_node_phase_seconds', { node: 'rebooter', phase: 'reboot' }).length === 1, 10_000, 'in reboot');
  agent.close();
  await eventually(async () => sample(await scrape(url), 'mcplane_agents_connected', { pool: 'worker' }) === 0, 10_000, 'gone');
  await new Promise((r) => setTimeout(r, 300));
  // The host is back: a new process, a new stream, registering in its next phase.
  const back = new SimulatedAgent({ address: server.address, tls: await server.pki.node('rebooter'), name: 'rebooter' });
  agents.push(back);
  back.status = { ...back.status, state: 'Working', phase: 'validate' };
  await back.connect();
  const m = await scrape(url);
  assert.equal(sample(m, 'mcplane_update_phase_duration_seconds_count', { phase: 'reboot' }), 1);
  assert.ok(sample(m, 'mcplane_update_phase_duration_seconds_sum', { phase: 'reboot' })! >= 0.3);
});

test('a render failure shows as mcplane_pool_render_degraded and a failed render, and clears when fixed', async () => {
  await startTestServer({ metrics: { listen: '127.0.0.1:0' } });
  const url = `http://127.0.0.1:${server.handle.metricsPort}/metrics`;
  const c = server.admin();
  // Three files of 450 KiB: together over what one stored object may hold (etcd's 1.5 MiB).
  const big = (name: string) => ({ source: `${name}.yaml`, text: mcYaml(name, 'worker', `  config:\n    ignition: {version: 3.4.0}\n    storage: {files: [{path: /etc/${name}, contents: {source: "data:;base64,${Buffer.alloc(450 * 1024, name).toString('base64')}"}}]}\n`) });
  await call(c, c.config.apply.bind(c.config), { manifests: [big('big-1'), big('big-2')], dryRun: false }, 'apply');
  let m = await scrape(url);
  assert.equal(sample(m, 'mcplane_pool_render_degraded', { pool: 'worker' }), 0);
  assert.equal(sample(m, 'mcplane_renders_total', { result: 'failed' }), undefined);
  await call(c, c.config.apply.bind(c.config), { manifests: [big('big-3')], dryRun: false }, 'apply');
  m = await scrape(url);
  assert.equal(sample(m, 'mcplane_pool_render_degraded', { pool: 'worker' }), 1);
  assert.equal(sample(m, 'mcplane_pool_render_degraded', { pool: 'master' }), 0);
  assert.equal(sample(m, 'mcplane_pool_degraded', { pool: 'worker' }), 1);
  assert.equal(sample(m, 'mcplane_renders_total', { result: 'failed' }), 1);
  assert.equal(sample(m, 'mcplane_render_duration_seconds_count', { result: 'failed' }), 1);
  await call(c, c.config.delete.bind(c.config), { kind: 'MachineConfig', name: 'big-1' }, 'delete');
  m = await scrape(url);
  assert.equal(sample(m, 'mcplane_pool_render_degraded', { pool: 'worker' }), 0);
  assert.equal(sample(m, 'mcplane_pool_degraded', { pool: 'worker' }), 0);
});
