import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatSelector, matchesSelector, type LabelSelector } from '../../src/machineconfig/index.ts';
import { poolDoc, problemsOf } from '../helpers/manifests.ts';

const labels = { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': 'a', tier: 'gold' };

test('matchLabels requires every label with its value', () => {
  assert.equal(matchesSelector({ matchLabels: { tier: 'gold' } }, labels), true);
  assert.equal(matchesSelector({ matchLabels: { tier: 'gold', 'topology.kubernetes.io/zone': 'b' } }, labels), false);
});

test('matchExpressions: In, NotIn, Exists, DoesNotExist', () => {
  const m = (sel: LabelSelector) => matchesSelector(sel, labels);
  assert.equal(m({ matchExpressions: [{ key: 'tier', operator: 'In', values: ['gold', 'silver'] }] }), true);
  assert.equal(m({ matchExpressions: [{ key: 'tier', operator: 'In', values: ['silver'] }] }), false);
  assert.equal(m({ matchExpressions: [{ key: 'missing', operator: 'In', values: ['x'] }] }), false);
  assert.equal(m({ matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['silver'] }] }), true);
  assert.equal(m({ matchExpressions: [{ key: 'missing', operator: 'NotIn', values: ['x'] }] }), true);
  assert.equal(m({ matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['gold'] }] }), false);
  assert.equal(m({ matchExpressions: [{ key: 'node-role.kubernetes.io/worker', operator: 'Exists' }] }), true);
  assert.equal(m({ matchExpressions: [{ key: 'missing', operator: 'Exists' }] }), false);
  assert.equal(m({ matchExpressions: [{ key: 'missing', operator: 'DoesNotExist' }] }), true);
  assert.equal(m({ matchExpressions: [{ key: 'tier', operator: 'DoesNotExist' }] }), false);
});

test('labels and expressions are ANDed; null matches nothing, {} everything', () => {
  assert.equal(matchesSelector({ matchLabels: { tier: 'gold' }, matchExpressions: [{ key: 'x', operator: 'Exists' }] }, labels), false);
  assert.equal(matchesSelector(null, labels), false);
  assert.equal(matchesSelector({}, labels), true);
});

test('bad operators and value counts are refused', () => {
  const problems = problemsOf(poolDoc('p', {
    nodeSelector: { matchExpressions: [
      { key: 'a', operator: 'Equals', values: ['x'] },
      { key: 'b', operator: 'In' },
      { key: 'c', operator: 'Exists', values: ['x'] },
    ] },
  }));
  assert.deepEqual(problems.map((p) => `${p.field}:${p.rule}`), [
    'spec.nodeSelector.matchExpressions[0].operator:selector-operator',
    'spec.nodeSelector.matchExpressions[1].values:selector-values',
    'spec.nodeSelector.matchExpressions[2].values:selector-values',
  ]);
});

test('selectors print as kubectl prints them', () => {
  assert.equal(formatSelector({ matchLabels: { a: 'b' }, matchExpressions: [{ key: 'r', operator: 'In', values: ['x', 'y'] }, { key: 'e', operator: 'DoesNotExist' }] }), 'a=b,r in (x,y),!e');
});
