// Rollout over real gRPC with many simulated agents: maxUnavailable, order, pause, degraded nodes.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { serverPerTest } from '../helpers/server-fixture.ts';

const { server, agents, start: startServer } = serverPerTest();

const kargConfig = (value: string) => ({ source: 'karg.yaml', text: mcYaml('50-karg', 'worker', `  kernelArguments: [${value}]\n`) });
const workerPool = (maxUnavailable: number | string, paused = false) => ({
  source: 'pool.yaml',
  text: poolYaml('worker', `  maxUnavailable: ${JSON.stringify(maxUnavailable)}\n  paused: ${paused}\n`),
});

async function fleet(count: number, zoneOf: (i: number) => string, autoDone: boolean): Promise<SimulatedAgent[]> {
  const out: SimulatedAgent[] = [];
  for (let i = 0; i < count; i++) {
    const name = `node-${String(i).padStart(2, '0')}`;
    const agent = new SimulatedAgent({
      address: server.address, tls: await server.pki.node(name), name, autoDone,
      labels: { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': zoneOf(i) },
    });
    await agent.connect(); // one at a time: registration order is age order
    out.push(agent);
  }
  agents.push(...out);
  return out;
}

test('new nodes get the pool config at once, then a change rolls out at most maxUnavailable at a time, by zone then age', async () => {
  await startServer();
  const c = server.admin();
  await call(c, c.config.apply.bind(c.config), { manifests: [workerPool(2), kargConfig('a=1')], dryRun: false }, 'apply');
  // Registration order node-00..node-07; zones interleave so zone order differs from age order.
  const nodes = await fleet(8, (i) => (i % 2 ? 'zone-a' : 'zone-b'), false);
  const first = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  for (const n of nodes) await n.waitFor(() => n.lastAssignment?.renderedConfig === first);
  for (const n of nodes) n.report({ currentConfig: first, desiredConfig: first, state: 'Done' });
  await eventually(async () => (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.updatedMachineCount === 8, 10_000, 'all updated');

  await call(c, c.config.apply.bind(c.config), { manifests: [kargConfig('a=2')], dryRun: false }, 'apply');
  const target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  assert.notEqual(target, first);

  const order: string[] = [];
  let maxConcurrent = 0;
  while (order.length < 8) {
    const working = nodes.filter((n) => n.lastAssignment?.renderedConfig === target && n.status.currentConfig !== target);
    maxConcurrent = Math.max(maxConcurrent, working.length);
    assert.ok(working.length <= 2, `at most 2 nodes update at once, saw ${working.map((n) => n.options.name)}`);
    if (working.length === 0) {
      await eventually(() => nodes.some((n) => n.lastAssignment?.renderedConfig === target && n.status.currentConfig !== target), 10_000, 'next assignment');
      continue;
    }
    // Finish the oldest one only, so the server must refill one slot at a time.
    const next = working.sort((a, b) => a.options.name.localeCompare(b.options.name))[0]!;
    next.report({ state: 'Working', phase: 'apply', desiredConfig: target });
    await new Promise((r) => setTimeout(r, 30));
    assert.ok(nodes.filter((n) => n.lastAssignment?.renderedConfig === target && n.status.currentConfig !== target).length <= 2);
    next.report({ currentConfig: target, desiredConfig: target, state: 'Done', phase: 'done' });
    order.push(next.options.name);
    await new Promise((r) => setTimeout(r, 30));
  }
  assert.equal(maxConcurrent, 2);
  // The order the server handed the target out: zone-a (the odd nodes) first, oldest first.
  const assignedOrder = nodes
    .map((n) => ({ name: n.options.name, seq: n.assignments.find((a) => a.renderedConfig === target)!.sequence }))
    .sort((a, b) => a.seq - b.seq)
    .map((x) => x.name);
  assert.deepEqual(assignedOrder, ['node-01', 'node-03', 'node-05', 'node-07', 'node-00', 'node-02', 'node-04', 'node-06']);
  await eventually(async () => {
    const p = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
    return p.status!.updatedMachineCount === 8 && p.status!.conditions.find((x) => x.type === 'Updated')!.status === 'True';
  }, 10_000, 'pool Updated');
});

test('a paused pool renders but assigns nothing, and says so; resuming rolls out', async () => {
  await startServer();
  const c = server.admin();
  await call(c, c.config.apply.bind(c.config), { manifests: [workerPool('100%'), kargConfig('a=1')], dryRun: false }, 'apply');
  const nodes = await fleet(3, () => 'z', true);
  const first = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  await eventually(async () => (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.updatedMachineCount === 3);

  await call(c, c.config.setPoolPaused.bind(c.config), { name: 'worker', paused: true }, 'pause');
  await call(c, c.config.apply.bind(c.config), { manifests: [kargConfig('a=2')], dryRun: false }, 'apply');
  const paused = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
  assert.notEqual(paused.status!.configuration, first, 'a paused pool still renders');
  const updating = paused.status!.conditions.find((x) => x.type === 'Updating')!;
  assert.equal(updating.reason, 'Paused');
  assert.match(updating.message, /paused: 3 nodes wait for rendered-worker-/);
  await new Promise((r) => setTimeout(r, 200));
  for (const n of nodes) assert.equal(n.lastAssignment!.renderedConfig, first, 'nothing new assigned while paused');

  await call(c, c.config.setPoolPaused.bind(c.config), { name: 'worker', paused: false }, 'resume');
  for (const n of nodes) await n.waitFor(() => n.lastAssignment!.renderedConfig === paused.status!.configuration);
  await eventually(async () => (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.updatedMachineCount === 3);
});

test('a degraded node degrades the pool with its name and reason; disconnected nodes count as unavailable', async () => {
  await startServer();
  const c = server.admin();
  const nodes = await fleet(3, () => 'z', true);
  await eventually(async () => (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.updatedMachineCount === 3);
  nodes[1]!.report({ state: 'Degraded', phase: 'apply', reason: 'apply: file /etc/x: EACCES: permission denied' });
  nodes[2]!.close();
  await eventually(async () => {
    const p = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
    return p.status!.degradedMachineCount === 1 && p.status!.unavailableMachineCount === 2;
  }, 10_000, 'degraded and unavailable counts');
  const p = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
  const nd = p.status!.conditions.find((x) => x.type === 'NodeDegraded')!;
  assert.equal(nd.status, 'True');
  assert.match(nd.message, /node-01 \(Degraded: apply: file \/etc\/x: EACCES: permission denied\)/);
  assert.equal(p.status!.readyMachineCount, 1);
  const node = await call(c, c.status.getNode.bind(c.status), { name: 'node-02' }, 'get');
  assert.equal(node.status!.connected, false);
});
