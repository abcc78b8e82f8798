// A disruption-policy change reaches an update under way only through the rollout's re-decision,
// and only where the rollout itself would act: not a node Working on its config (its plan is in
// its journal), not one RolledBack from it, not the nodes of a paused pool. Real gRPC, simulated
// agents that report what the test says.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { serverPerTest } from '../helpers/server-fixture.ts';

const { server, agents, start: startServer } = serverPerTest();

const apply = (c: Clients, ...manifests: { source: string; text: string }[]) => call(c, c.config.apply.bind(c.config), { manifests, dryRun: false }, 'apply');
const fileConfig = (text: string) => ({ source: 'a.yaml', text: mcYaml('50-a', 'worker', `  config:\n    ignition: {version: 3.2.0}\n    storage:\n      files:\n      - {path: /etc/a.conf, mode: 420, contents: {source: "data:,${text}"}}\n`) });
const pool = (action: string, extra = '') => ({ source: 'pool.yaml', text: poolYaml('worker', `  maxUnavailable: 4\n  disruptionPolicy:\n    files:\n    - {path: /etc/a.conf, actions: [${action}]}\n${extra}`) });
const nodeState = async (c: Clients, name: string) => (await call(c, c.status.getNode.bind(c.status), { name }, 'get')).status!;

/** Four nodes that took `one`, then were handed `two` under the restart policy. */
async function fleetOnSecondConfig(c: Clients): Promise<{ nodes: SimulatedAgent[]; second: string }> {
  await apply(c, pool('{type: restart, unit: chronyd.service}'), fileConfig('one'));
  const nodes: SimulatedAgent[] = [];
  for (const name of ['working', 'rolled-back', 'degraded', 'done']) {
    const a = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name), name, autoDone: false });
    await a.connect();
    nodes.push(a);
  }
  agents.push(...nodes);
  const first = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  for (const n of nodes) {
    await n.waitFor(() => n.lastAssignment?.renderedConfig === first);
    n.report({ currentConfig: first, desiredConfig: first, state: 'Done', phase: 'done' });
  }
  await apply(c, fileConfig('two'));
  const second = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  for (const n of nodes) await n.waitFor(() => n.lastAssignment?.renderedConfig === second);
  const [working, rolledBack, degraded, done] = nodes;
  working!.report({ desiredConfig: second, state: 'Working', phase: 'apply' });
  rolledBack!.report({ desiredConfig: second, state: 'RolledBack', phase: 'health', reason: 'health: demo.service is failed' });
  degraded!.report({ desiredConfig: second, state: 'Degraded', phase: 'actions', reason: 'actions: restart chronyd.service: job ended "failed"' });
  done!.report({ currentConfig: second, desiredConfig: second, state: 'Done', phase: 'done' });
  await eventually(async () => (await nodeState(c, 'done')).currentConfig === second && (await nodeState(c, 'degraded')).state === 'Degraded'
    && (await nodeState(c, 'rolled-back')).state === 'RolledBack' && (await nodeState(c, 'working')).state === 'Working', 10_000, 'the four states');
  return { nodes, second };
}

test('only the node that will retry gets the changed policy; Working, RolledBack and Done nodes keep theirs', async () => {
  await startServer();
  const c = server.admin();
  const { nodes } = await fleetOnSecondConfig(c);
  const counts = nodes.map((n) => n.assignments.length);
  await apply(c, pool('{type: none}'));
  const [working, rolledBack, degraded, done] = nodes;
  await degraded!.waitFor(() => degraded!.assignments.length > counts[2]!, 10_000);
  assert.deepEqual(JSON.parse(degraded!.lastAssignment!.disruptionPolicyJson).files, [{ path: '/etc/a.conf', actions: [{ type: 'none' }] }]);
  // Decided in the same pass as the degraded node's: anything for the others would be here by now.
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual([working, rolledBack, done].map((n) => n!.assignments.length), [counts[0], counts[1], counts[3]]);
  const stored = (name: string) => JSON.parse(server.handle.controlPlane.cache.assignments.get(name)!.value.disruptionPolicyJson!).files[0].actions[0].type;
  assert.deepEqual(['working', 'rolled-back', 'degraded', 'done'].map(stored), ['restart', 'restart', 'none', 'restart']);
});

test('a paused pool keeps its nodes\' policies; resumed, the retrying node gets the new one', async () => {
  await startServer();
  const c = server.admin();
  const { nodes } = await fleetOnSecondConfig(c);
  const degraded = nodes[2]!;
  await apply(c, pool('{type: restart, unit: chronyd.service}', '  paused: true\n'));
  const count = degraded.assignments.length;
  await apply(c, pool('{type: none}', '  paused: true\n'));
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(degraded.assignments.length, count, 'nothing sent while paused');
  await apply(c, pool('{type: none}'));
  await degraded.waitFor(() => degraded.assignments.length > count, 10_000);
  assert.deepEqual(JSON.parse(degraded.lastAssignment!.disruptionPolicyJson).files, [{ path: '/etc/a.conf', actions: [{ type: 'none' }] }]);
});

test('an assignment stored before policies were kept with it is decided again under the live policy', async () => {
  await startServer();
  const c = server.admin();
  const { nodes } = await fleetOnSecondConfig(c);
  const cp = server.handle.controlPlane;
  // As a record from an older mcplane: no disruptionPolicyJson.
  const old = cp.cache.assignments.get('degraded')!;
  const { disruptionPolicyJson: _dropped, ...legacy } = old.value;
  await cp.store.commit([{ type: 'put', kind: 'NodeAssignment', name: 'degraded', value: legacy, expectedVersion: old.resourceVersion, createdAt: old.createdAt }]);
  await eventually(() => cp.cache.assignments.get('degraded')!.value.disruptionPolicyJson !== undefined, 10_000, 'decided again');
  assert.deepEqual(JSON.parse(cp.cache.assignments.get('degraded')!.value.disruptionPolicyJson!).files[0].actions, [{ type: 'restart', unit: 'chronyd.service' }]);
  assert.ok(nodes[2]!.lastAssignment);
});
