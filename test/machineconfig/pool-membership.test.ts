import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defaultPools, PoolConflictError, primaryPoolForNode, resolveMaxUnavailable } from '../../src/machineconfig/index.ts';
import { parseValid, poolDoc, problemsOf } from '../helpers/manifests.ts';

const custom = (name: string) => poolDoc(name, {
  machineConfigSelector: { matchLabels: { 'machineconfiguration.openshift.io/role': name } },
  nodeSelector: { matchLabels: { [`node-role.kubernetes.io/${name}`]: '' } },
});
const { pools: customPools } = parseValid(custom('infra'), custom('gpu'));
const pools = [...defaultPools(), ...customPools];
const role = (...roles: string[]) => Object.fromEntries(roles.map((r) => [`node-role.kubernetes.io/${r}`, '']));

test('a worker node belongs to worker; a worker+infra node to infra only', () => {
  assert.equal(primaryPoolForNode('n', role('worker'), pools)?.metadata.name, 'worker');
  assert.equal(primaryPoolForNode('n', role('worker', 'infra'), pools)?.metadata.name, 'infra');
});

test('master beats custom', () => {
  assert.equal(primaryPoolForNode('n', role('master', 'infra', 'worker'), pools)?.metadata.name, 'master');
});

test('two matching custom pools is an error naming both', () => {
  assert.throws(() => primaryPoolForNode('node-7', role('worker', 'infra', 'gpu'), pools), (err: unknown) => {
    assert.ok(err instanceof PoolConflictError);
    assert.equal(err.code, 'MCPLANE_POOL_CONFLICT');
    assert.deepEqual(err.pools, ['gpu', 'infra']);
    assert.match(err.message, /node-7.*gpu, infra/);
    return true;
  });
});

test('an empty nodeSelector selects no node; no match means no pool', () => {
  const { pools: empty } = parseValid(poolDoc('everything', { nodeSelector: {} }));
  assert.equal(primaryPoolForNode('n', role('anything'), empty), undefined);
  assert.equal(primaryPoolForNode('n', {}, pools), undefined);
});

test('maxUnavailable: integer, percent rounded down, at least 1', () => {
  assert.equal(resolveMaxUnavailable(3, 10), 3);
  assert.equal(resolveMaxUnavailable('25%', 10), 2);
  assert.equal(resolveMaxUnavailable('10%', 5), 1);
  assert.equal(resolveMaxUnavailable('100%', 7), 7);
  assert.equal(resolveMaxUnavailable(0, 7), 1);
  const problems = problemsOf(poolDoc('p', { maxUnavailable: '150%' }), poolDoc('q', { maxUnavailable: -1 }), poolDoc('r', { maxUnavailable: 'two' }));
  assert.deepEqual(problems.map((p) => `${p.object}:${p.rule}`), [
    'MachineConfigPool/p:max-unavailable', 'MachineConfigPool/q:max-unavailable', 'MachineConfigPool/r:max-unavailable',
  ]);
});

test('pool extensions: disruptionPolicy in mcplane and MCO spellings, driftPolicy', () => {
  const { pools: [p] } = parseValid(poolDoc('p', {
    driftPolicy: 'Reconcile',
    disruptionPolicy: {
      files: [{ path: '/etc/chrony.conf', actions: [{ type: 'Restart', restart: { serviceName: 'chronyd.service' } }] }],
      units: [{ name: 'a.service', actions: [{ type: 'daemon-reload' }, { type: 'reload', unit: 'a.service' }] }],
      sshkey: { actions: [{ type: 'None' }] },
    },
  }));
  assert.equal(p!.spec.driftPolicy, 'Reconcile');
  assert.deepEqual(p!.spec.disruptionPolicy, {
    files: [{ path: '/etc/chrony.conf', actions: [{ type: 'restart', unit: 'chronyd.service' }] }],
    units: [{ name: 'a.service', actions: [{ type: 'daemon-reload' }, { type: 'reload', unit: 'a.service' }] }],
    sshkey: { actions: [{ type: 'none' }] },
  });
  const problems = problemsOf(poolDoc('q', { driftPolicy: 'Ignore', disruptionPolicy: { files: [{ path: '/etc/x', actions: [{ type: 'restart' }, { type: 'explode' }] }] } }));
  assert.deepEqual(problems.map((p) => p.rule), ['drift-policy', 'required', 'disruption-action']);
});

test('a pool\'s disruptionPolicy follows MCO\'s entry rules: one entry per path and unit, real unit names, at most 50 entries and 10 actions', () => {
  const action = [{ type: 'none' }];
  const problems = problemsOf(poolDoc('p', {
    disruptionPolicy: {
      files: [{ path: '/etc/a', actions: action }, { path: '/etc/a', actions: action }, { path: 'etc/b', actions: action }],
      units: [{ name: 'crio', actions: action }, { name: 'a.service', actions: [{ type: 'restart', unit: 'nope' }] }, { name: 'a.service', actions: action }],
      sshkey: { actions: action, extra: true },
    },
  }));
  assert.deepEqual(problems.map((p) => `${p.field} ${p.rule}`), [
    'spec.disruptionPolicy.files[1].path duplicate-entry',
    'spec.disruptionPolicy.files[2].path path-absolute',
    'spec.disruptionPolicy.units[0].name service-name',
    'spec.disruptionPolicy.units[1].actions[0].unit service-name',
    'spec.disruptionPolicy.units[2].name duplicate-entry',
    'spec.disruptionPolicy.sshkey.extra unknown-field',
  ]);
  const many = problemsOf(poolDoc('q', {
    disruptionPolicy: {
      files: Array.from({ length: 51 }, (_, i) => ({ path: `/etc/f${i}`, actions: action })),
      sshkey: { actions: Array.from({ length: 11 }, () => ({ type: 'daemon-reload' })) },
    },
  }));
  assert.deepEqual(many.map((p) => `${p.field} ${p.rule}`), ['spec.disruptionPolicy.files max-items', 'spec.disruptionPolicy.sshkey.actions max-items']);
});
