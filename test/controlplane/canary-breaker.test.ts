// spec.rollout over real gRPC with simulated agents: canaries go first and soak on a clock the
// test moves, the circuit breaker pauses or rolls the pool back, and `mcctl resume pool` (the
// SetPoolPaused call) clears a halt. The agents' side (health gate, RolledBack) is in
// test/agent/health-gate.test.ts.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { ManualClock } from '../../src/controlplane/replica/clock.ts';
import { referencedConfigs } from '../../src/controlplane/cache/referenced-configs.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { serverPerTest } from '../helpers/server-fixture.ts';
import type { TestServer } from '../helpers/test-server.ts';

const { server, agents, start: startServer } = serverPerTest();

const kargConfig = (value: string) => ({ source: 'karg.yaml', text: mcYaml('50-karg', 'worker', `  kernelArguments: [${value}]\n`) });
const workerPool = (rollout: string, maxUnavailable = 1) => ({ source: 'pool.yaml', text: poolYaml('worker', `  maxUnavailable: ${maxUnavailable}\n  rollout: ${rollout}\n`) });

async function fleet(count: number): Promise<SimulatedAgent[]> {
  const out: SimulatedAgent[] = [];
  for (let i = 0; i < count; i++) {
    const name = `node-${i}`;
    const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name), name, autoDone: true });
    await agent.connect(); // one at a time: registration order is the rollout order
    out.push(agent);
  }
  agents.push(...out);
  return out;
}

async function pool(c: ReturnType<TestServer['admin']>) {
  return (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool'));
}
const condition = (p: Awaited<ReturnType<typeof pool>>, type: string) => p.status!.conditions.find((x) => x.type === type)!;

/** Starts a fleet of `count` nodes all Done on the first config; returns the next target's name. */
async function fleetOnFirstConfig(c: ReturnType<TestServer['admin']>, rollout: string, count: number, maxUnavailable = 1) {
  await call(c, c.config.apply.bind(c.config), { manifests: [workerPool(rollout, maxUnavailable), kargConfig('a=1')], dryRun: false }, 'apply');
  const nodes = await fleet(count);
  const first = (await pool(c)).status!.configuration;
  await eventually(async () => (await pool(c)).status!.updatedMachineCount === count, 10_000, 'all on the first config');
  return { nodes, first };
}

test('a canary of 1 with a soak: the rest wait until the canary has been Done for the soak, then go', async () => {
  const clock = new ManualClock(Date.parse('2026-11-22T10:00:00Z'));
  await startServer({ clock });
  const c = server.admin();
  const { nodes } = await fleetOnFirstConfig(c, '{canary: 1, soak: 10m}', 3, 3);

  await call(c, c.config.apply.bind(c.config), { manifests: [kargConfig('a=2')], dryRun: false }, 'apply');
  const target = (await pool(c)).status!.configuration;
  // node-0 registered first: it is the canary and the only one given the target.
  await nodes[0]!.waitFor(() => nodes[0]!.status.currentConfig === target);
  await eventually(async () => condition(await pool(c), 'Updating').message.includes('soaking until 2026-11-22T10:10:00.000Z'), 10_000, 'soak in the condition');
  const updating = condition(await pool(c), 'Updating');
  assert.equal(updating.reason, 'Canary');
  assert.match(updating.message, /the canary node-0 is soaking until 2026-11-22T10:10:00.000Z \(soak 10m\), then the rest go/);
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(nodes.slice(1).map((n) => n.lastAssignment?.renderedConfig === target), [false, false], 'the rest wait during the soak');

  clock.advance(9 * 60_000);
  server.handle.controlPlane.resync();
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(nodes.slice(1).map((n) => n.lastAssignment?.renderedConfig === target), [false, false], 'still soaking after 9 minutes');

  clock.advance(60_000);
  server.handle.controlPlane.resync();
  await eventually(async () => (await pool(c)).status!.updatedMachineCount === 3, 10_000, 'the rest go after the soak');
  assert.equal(condition(await pool(c), 'Updated').status, 'True');
});

test('Pause: a failed canary halts the pool, the condition names it, and `resume pool` clears the halt', async () => {
  await startServer();
  const c = server.admin();
  const { nodes } = await fleetOnFirstConfig(c, '{canary: 1, maxFailures: 0, onFailure: Pause}', 3, 3);
  nodes[0]!.options.autoDone = false;

  await call(c, c.config.apply.bind(c.config), { manifests: [kargConfig('a=2')], dryRun: false }, 'apply');
  const target = (await pool(c)).status!.configuration;
  await nodes[0]!.waitFor(() => nodes[0]!.lastAssignment?.renderedConfig === target);
  nodes[0]!.report({ desiredConfig: target, state: 'RolledBack', phase: 'health', reason: 'health: unit web.service is not active (failed)' });

  await eventually(async () => condition(await pool(c), 'Updating').reason === 'RolloutPaused', 10_000, 'the pool halts');
  const p = await pool(c);
  assert.equal(p.paused, false, 'the user\'s spec.paused is left alone');
  assert.match(condition(p, 'Updating').message, new RegExp(`the rollout stopped: 1 node failed on ${target} \\(maxFailures 0\\): node-0 \\(RolledBack: health: unit web.service is not active \\(failed\\)\\); \`mcctl resume pool worker\` retries`));
  assert.match(condition(p, 'NodeDegraded').message, /node-0 \(RolledBack/);
  // What an operator reads: the node's new state and the pool's settings and halt.
  const conn = ['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null'];
  const nodesOut = await runCliAsync([...conn, 'get', 'nodes']);
  assert.match(nodesOut.stdout, /node-0\s+worker\s+RolledBack\s+health\s/);
  const describeOut = await runCliAsync([...conn, 'describe', 'pool', 'worker']);
  assert.match(describeOut.stdout, /Rollout:\s+\{"maxFailures":0,"onFailure":"Pause","canary":1\}/);
  assert.match(describeOut.stdout, /Updating\s+False\s+RolloutPaused\s+\S+\s+the rollout stopped: 1 node failed/);
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(nodes.slice(1).map((n) => n.lastAssignment?.renderedConfig === target), [false, false], 'nothing more is assigned');

  // The operator resumes; the failure they resumed past is not counted again, so the rest go
  // once the canary is fixed (here: it reports Done).
  await call(c, c.config.setPoolPaused.bind(c.config), { name: 'worker', paused: false }, 'resume');
  // The leader clears the halt when it sees the resume (asynchronously, through the watch).
  await eventually(async () => condition(await pool(c), 'Updating').reason !== 'RolloutPaused', 10_000, 'the halt cleared');
  nodes[0]!.report({ currentConfig: target, desiredConfig: target, state: 'Done', phase: 'done', reason: '' });
  await eventually(async () => (await pool(c)).status!.updatedMachineCount === 3, 10_000, 'the rollout continues');
});

test('Rollback: more failures than maxFailures send every node back to the last config they all reached, and it stays there', async () => {
  await startServer();
  const c = server.admin();
  const { nodes, first } = await fleetOnFirstConfig(c, '{maxFailures: 1, onFailure: Rollback}', 4, 3);
  const [n0, n1] = [nodes[0]!, nodes[1]!];
  n0.options.autoDone = false;
  n1.options.autoDone = false;

  await call(c, c.config.apply.bind(c.config), { manifests: [kargConfig('a=2')], dryRun: false }, 'apply');
  const target = (await pool(c)).status!.configuration;
  await n0.waitFor(() => n0.lastAssignment?.renderedConfig === target);
  n0.report({ desiredConfig: target, state: 'Degraded', phase: 'validate', reason: 'validate: kernel argument a=2 missing' });
  await n1.waitFor(() => n1.lastAssignment?.renderedConfig === target);
  // One failure is within maxFailures: the rollout goes on and another node takes the target.
  await eventually(() => nodes.slice(2).some((n) => n.status.currentConfig === target), 10_000, 'a third node updates');
  n1.report({ desiredConfig: target, state: 'RolledBack', phase: 'health', reason: 'health: command /usr/bin/check exited 3' });

  await eventually(async () => condition(await pool(c), 'Updating').reason === 'RolledBack', 10_000, 'the pool rolls back');
  // Every node, the updated one included, gets the previous config back.
  for (const n of nodes) await n.waitFor(() => n.lastAssignment?.renderedConfig === first);
  n0.report({ currentConfig: first, desiredConfig: first, state: 'Done', phase: 'done', reason: '' });
  n1.report({ currentConfig: first, desiredConfig: first, state: 'Done', phase: 'done', reason: '' });
  await eventually(async () => (await pool(c)).status!.updatedMachineCount === 4, 10_000, 'all back on the first config');
  const p = await pool(c);
  assert.equal(p.status!.configuration, first, 'the pool reports the config it returned to');
  assert.match(condition(p, 'Updating').message, new RegExp(`rolled back to ${first}: 2 nodes failed on ${target} \\(maxFailures 1\\): node-0 \\(Degraded: validate: kernel argument a=2 missing\\), node-1 \\(RolledBack: health: command /usr/bin/check exited 3\\)`));
  // It does not flap back to the failed target once the nodes are healthy again.
  await new Promise((r) => setTimeout(r, 300));
  assert.ok(nodes.every((n) => n.lastAssignment?.renderedConfig === first));

  // The render GC keeps the config the pool returned to; a new config ends the halt.
  assert.deepEqual(referencedConfigs(server.handle.controlPlane.cache).get(first), ['node/node-0', 'node/node-1', 'node/node-2', 'node/node-3', 'pool/worker (rollback)']);
  n0.options.autoDone = true;
  n1.options.autoDone = true;
  await call(c, c.config.apply.bind(c.config), { manifests: [kargConfig('a=3')], dryRun: false }, 'apply');
  const third = (await pool(c)).status!.configuration;
  assert.notEqual(third, target);
  await eventually(async () => (await pool(c)).status!.updatedMachineCount === 4 && (await pool(c)).status!.configuration === third, 10_000, 'the new config rolls out');
});
