// mcplane's pool fields in the mcplane.io/pool-spec annotation: what MCO's CRD would prune from
// spec survives there, and is read as if it were in spec.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { POOL_SPEC_ANNOTATION } from '../../src/machineconfig/index.ts';
import { parseValid, poolDoc, problemsOf } from '../helpers/manifests.ts';

const base = { machineConfigSelector: { matchLabels: { 'machineconfiguration.openshift.io/role': 'worker' } }, nodeSelector: { matchLabels: { 'node-role.kubernetes.io/worker': '' } } };
const annotated = (text: string, spec: Record<string, unknown> = base) => ({ ...poolDoc('worker', spec), metadata: { name: 'worker', annotations: { [POOL_SPEC_ANNOTATION]: text } } });

test('the annotation\'s fields (JSON or YAML) are read as spec fields; the annotation is kept', () => {
  const json = JSON.stringify({ maintenanceWindows: [{ schedule: '0 2 * * 6', duration: '4h', timeZone: 'Europe/Berlin' }], rollout: { canary: 1, soak: '10m' } });
  const { pools: [fromJson] } = parseValid(annotated(json));
  assert.deepEqual(fromJson!.spec.maintenanceWindows, [{ schedule: '0 2 * * 6', duration: '4h', timeZone: 'Europe/Berlin' }]);
  assert.deepEqual(fromJson!.spec.rollout, { canary: 1, soak: '10m', maxFailures: 0, onFailure: 'Pause' });
  assert.equal(fromJson!.metadata.annotations?.[POOL_SPEC_ANNOTATION], json);
  const { pools: [fromYaml] } = parseValid(annotated('driftPolicy: Reconcile\ndisruptionBudget: {groupBy: [rack], maxUnavailable: 1}\n'));
  assert.equal(fromYaml!.spec.driftPolicy, 'Reconcile');
  assert.deepEqual(fromYaml!.spec.disruptionBudget, { groupBy: ['rack'], maxUnavailable: 1 });
});

test('every problem names the annotation: bad YAML, not an object, MCO\'s own field, a field in both places, a bad value', () => {
  const field = `metadata.annotations[${POOL_SPEC_ANNOTATION}]`;
  const rules = (doc: Record<string, unknown>) => problemsOf(doc).map((p) => `${p.field} ${p.rule}`);
  assert.deepEqual(rules(annotated('{rollout: [')), [`${field} pool-spec-annotation`]);
  assert.deepEqual(rules(annotated('- a\n- b\n')), [`${field} pool-spec-annotation`]);
  assert.deepEqual(rules(annotated('paused: true')), [`${field}.paused pool-spec-annotation`]);
  assert.deepEqual(rules(annotated('driftPolicy: Reconcile', { ...base, driftPolicy: 'Degrade' })), [`${field}.driftPolicy pool-spec-annotation`]);
  const bad = annotated('rollout: {canary: "150%"}\nmaintenanceWindows: [{schedule: "0 2 * * *", duration: 4h, timeZone: Mars/Olympus}]');
  assert.deepEqual(rules(bad).sort(), [`${field}.maintenanceWindows[0].timeZone time-zone`, `${field}.rollout.canary canary`]);
});

test('tagged YAML that is not a plain mapping is refused as a whole, not walked', () => {
  const field = `metadata.annotations[${POOL_SPEC_ANNOTATION}]`;
  for (const text of ['!!binary aGVsbG8gd29ybGQ=', '!!set {a, b}', '!!omap [{a: 1}]', '&a {x: *a}']) {
    assert.deepEqual(problemsOf(annotated(text)).map((p) => `${p.field} ${p.rule}`), [`${field} pool-spec-annotation`], text);
  }
});
