import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decideRollout, defaultPools, type MachineConfigPool } from '../../src/machineconfig/index.ts';
import { nodeRecord } from '../helpers/nodes.ts';

const pool = (maxUnavailable: number | string, paused = false): MachineConfigPool => {
  const p = structuredClone(defaultPools()[1]!);
  p.spec.maxUnavailable = maxUnavailable;
  p.spec.paused = paused;
  return p;
};
const zone = (z: string) => ({ 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': z });

test('at most maxUnavailable at a time, ordered by zone then oldest registration', () => {
  const nodes = [
    nodeRecord('c', { labels: zone('b'), registeredAt: 1 }),
    nodeRecord('a', { labels: zone('a'), registeredAt: 5 }),
    nodeRecord('b', { labels: zone('a'), registeredAt: 2 }),
    nodeRecord('d', { labels: zone('b'), registeredAt: 0 }),
  ];
  assert.deepEqual(decideRollout(pool(1), 'new', nodes).assign, ['b']);
  assert.deepEqual(decideRollout(pool(3), 'new', nodes).assign, ['b', 'a', 'd']);
  assert.deepEqual(decideRollout(pool('50%'), 'new', nodes).assign, ['b', 'a']);
  assert.deepEqual(decideRollout(pool('100%'), 'new', nodes).assign, ['b', 'a', 'd', 'c']);
});

test('updating, disconnected and degraded nodes use up the budget', () => {
  const base = () => [nodeRecord('n1', { registeredAt: 1 }), nodeRecord('n2', { registeredAt: 2 }), nodeRecord('n3', { registeredAt: 3 })];
  const updating = base();
  updating[0]!.desiredConfig = 'new';
  updating[0]!.status.state = 'Working';
  assert.deepEqual(decideRollout(pool(1), 'new', updating).assign, []);
  assert.deepEqual(decideRollout(pool(2), 'new', updating).assign, ['n2']);

  const disconnected = base();
  disconnected[2]!.connected = false;
  const d = decideRollout(pool(1), 'new', disconnected);
  assert.deepEqual(d.assign, []);
  assert.equal(d.unavailable, 1);
  assert.deepEqual(decideRollout(pool(2), 'new', disconnected).assign, ['n1'], 'a disconnected node is never a candidate');
});

test('a degraded node off-target gets the new target without spending budget', () => {
  const nodes = [nodeRecord('n1', { registeredAt: 1 }), nodeRecord('n2', { registeredAt: 2, status: { state: 'Degraded', reason: 'x' } })];
  assert.deepEqual(decideRollout(pool(1), 'new', nodes).assign, ['n2']);
  assert.deepEqual(decideRollout(pool(2), 'new', nodes).assign, ['n2', 'n1']);
});

test('nodes still updating to an earlier config take the target within the budget, first in line', () => {
  // The store may not have their Done yet (reports are written in batches): handed the target
  // for free, two new hosts that had both just finished would start updating again together.
  const nodes = [
    nodeRecord('n1', { registeredAt: 1 }),
    nodeRecord('n2', { registeredAt: 2, status: { currentConfig: '', state: 'Working' } }),
    nodeRecord('n3', { registeredAt: 3, status: { currentConfig: '', state: 'Working' } }),
  ];
  const d = decideRollout(pool(1), 'new', nodes);
  assert.deepEqual(d.assign, ['n2']);
  assert.equal(d.waiting, 2);
  assert.deepEqual(decideRollout(pool(2), 'new', nodes).assign, ['n2', 'n3']);
  assert.deepEqual(decideRollout(pool(3), 'new', nodes).assign, ['n2', 'n3', 'n1']);
  // n2 took it and works on it: n3 finishes its first config and waits its turn.
  nodes[1]!.desiredConfig = 'new';
  assert.deepEqual(decideRollout(pool(1), 'new', nodes).assign, []);
});

test('a new host with no config gets the target at once', () => {
  const nodes = [
    nodeRecord('busy', { desiredConfig: 'new', status: { state: 'Working' } }),
    nodeRecord('fresh', { desiredConfig: '', status: { currentConfig: '', desiredConfig: '' } }),
  ];
  assert.deepEqual(decideRollout(pool(1), 'new', nodes).assign, ['fresh']);
});

test('a paused pool assigns nothing and says how many wait', () => {
  const d = decideRollout(pool(5, true), 'new', [nodeRecord('a'), nodeRecord('b')]);
  assert.deepEqual(d.assign, []);
  assert.equal(d.waiting, 2);
});

test('nodes already on the target are left alone', () => {
  const nodes = [nodeRecord('a', { desiredConfig: 'new', status: { currentConfig: 'new' } }), nodeRecord('b')];
  assert.deepEqual(decideRollout(pool(1), 'new', nodes).assign, ['b']);
});
