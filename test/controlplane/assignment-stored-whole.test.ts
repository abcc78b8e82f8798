// An assignment is decided once, by the leader, and stored whole: the rendered config and every
// policy the agent runs it with (the disruption policy, the pool's drift policy and health
// check). The replica holding a node's stream sends the record as stored and decides nothing.
// Real gRPC over TLS, simulated agents, the real store on both backends.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { serverPerTest } from '../helpers/server-fixture.ts';

const { server, agents, start: startServer } = serverPerTest();

const HEALTH = '  healthCheck:\n    units: [chronyd.service]\n    timeout: 30s\n';
const apply = (c: Clients, text: string) => call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'pool.yaml', text }], dryRun: false }, 'apply');

/** A worker pool with a config and three agents Done on it. */
async function fleet(): Promise<{ c: Clients; nodes: SimulatedAgent[]; target: string }> {
  await startServer();
  const c = server.admin();
  await call(c, c.config.apply.bind(c.config), {
    manifests: [
      { source: 'pool.yaml', text: poolYaml('worker', '  maxUnavailable: 100%\n') },
      { source: 'a.yaml', text: mcYaml('50-a', 'worker', '  kernelArguments: [a=1]\n') },
    ],
    dryRun: false,
  }, 'apply');
  const nodes: SimulatedAgent[] = [];
  for (const name of ['n-0', 'n-1', 'n-2']) {
    const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name), name, autoDone: true });
    await agent.connect();
    nodes.push(agent);
  }
  agents.push(...nodes);
  const target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  for (const n of nodes) await n.waitFor(() => n.lastAssignment?.renderedConfig === target, 10_000);
  return { c, nodes, target };
}

const stored = (node: string) => server.handle.controlPlane.cache.assignments.get(node)!;

test('the leader stores the pool\'s drift policy and health check with every assignment', async () => {
  const { nodes } = await fleet();
  for (const n of nodes) assert.deepEqual([stored(n.options.name).value.driftPolicy, stored(n.options.name).value.healthCheckJson], ['Degrade', '']);
});

test('a drift policy and health check change is written into every node\'s record, paused pool and finished updates alike, and heard by the agents', async () => {
  const { c, nodes, target } = await fleet();
  await apply(c, poolYaml('worker', `  maxUnavailable: 100%\n  paused: true\n  driftPolicy: Reconcile\n${HEALTH}`));
  const health = { units: ['chronyd.service'], command: [], timeout: '30s' };
  await eventually(() => nodes.every((n) => stored(n.options.name).value.driftPolicy === 'Reconcile'), 10_000, 'every record has the new drift policy');
  for (const n of nodes) {
    const record = stored(n.options.name).value;
    assert.deepEqual(JSON.parse(record.healthCheckJson!), health);
    assert.equal(record.desiredConfig, target, 'the config is not touched');
    await n.waitFor(() => n.lastAssignment?.driftPolicy === 'Reconcile', 10_000);
    assert.deepEqual(JSON.parse(n.lastAssignment!.healthCheckJson), health);
    assert.equal(n.lastAssignment!.renderedConfig, target);
  }
});

test('the replica sends the record as stored, not the pool as it stands', async () => {
  const { nodes } = await fleet();
  const cp = server.handle.controlPlane;
  const node = nodes[0]!;
  const before = node.assignments.length;
  // A record that disagrees with the live pool (Degrade): what the agent hears is the record's.
  // The leader then writes the pool's policy back in, and the agent hears that too.
  const record = stored('n-0');
  await cp.store.commit([{ type: 'put', kind: 'NodeAssignment', name: 'n-0', value: { ...record.value, driftPolicy: 'Reconcile' }, expectedVersion: record.resourceVersion, createdAt: record.createdAt }]);
  await node.waitFor(() => node.assignments.length >= before + 2, 10_000);
  assert.deepEqual(node.assignments.slice(before).map((a) => a.driftPolicy), ['Reconcile', 'Degrade']);
  await eventually(() => stored('n-0').value.driftPolicy === 'Degrade', 10_000, 'the leader wrote the pool\'s policy back');
});

test('a record written by an older leader is filled in by the leader, and its agent never hears it without the pool\'s policies', async () => {
  const { c, nodes } = await fleet();
  const cp = server.handle.controlPlane;
  await apply(c, poolYaml('worker', `  maxUnavailable: 100%\n  paused: true\n${HEALTH}`));
  await eventually(() => stored('n-1').value.healthCheckJson !== '', 10_000, 'the health check stored');
  const node = nodes[1]!;
  const record = stored('n-1');
  const { driftPolicy: _drift, healthCheckJson: _health, ...legacy } = record.value;
  const before = node.assignments.length;
  await cp.store.commit([{ type: 'put', kind: 'NodeAssignment', name: 'n-1', value: legacy, expectedVersion: record.resourceVersion, createdAt: record.createdAt }]);
  await eventually(() => stored('n-1').value.driftPolicy === 'Degrade' && stored('n-1').value.healthCheckJson !== undefined, 10_000, 'filled in');
  assert.deepEqual(JSON.parse(stored('n-1').value.healthCheckJson!).units, ['chronyd.service']);
  // The record stood without them for a while: the agent never heard an assignment without the
  // pool's health check.
  assert.ok(node.assignments.slice(before).every((a) => JSON.parse(a.healthCheckJson).units[0] === 'chronyd.service'));
  assert.deepEqual(JSON.parse(node.lastAssignment!.healthCheckJson).units, ['chronyd.service']);
});

test('a pool\'s hooks changed while its nodes run the same config reach every agent, each change in turn', async () => {
  // The dispatcher keeps each pool's hooks per rendered config (made once, not once per send):
  // a pool's new hooks must still reach streams that already got that config.
  const { c, nodes, target } = await fleet();
  for (const n of nodes) assert.equal(n.lastAssignment!.hooksJson, '');
  for (const command of ['/usr/bin/flush', '/usr/bin/sync']) {
    await apply(c, poolYaml('worker', `  maxUnavailable: 100%\n  hooks:\n    beforeRebooting:\n      - run: [${command}]\n`));
    for (const n of nodes) {
      await n.waitFor(() => n.lastAssignment?.hooksJson.includes(command) === true, 10_000);
      assert.deepEqual(JSON.parse(n.lastAssignment!.hooksJson), { beforeRebooting: [{ run: [command] }] });
      assert.equal(n.lastAssignment!.renderedConfig, target, 'the config is not touched');
    }
  }
});
