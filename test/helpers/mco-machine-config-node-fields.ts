// MCO's MachineConfigNode, field by field: the JSON field names of each of its Go types, from
// openshift/api machineconfiguration/v1/types_machineconfignode.go at commit
// 2a3d73913b5a7caec4c57d5c3d04f51106ec4da3 (metav1.Condition's from k8s.io/apimachinery).
// `required` are the fields without omitempty that MCO always writes. The mcctl test and the real
// agent's update test both compare against this one table.

import assert from 'node:assert/strict';

export const MCO_MCN_FIELDS: Record<string, { all: string[]; required: string[] }> = {
  MachineConfigNode: { all: ['apiVersion', 'kind', 'metadata', 'spec', 'status'], required: ['apiVersion', 'kind', 'metadata', 'spec', 'status'] },
  MachineConfigNodeSpec: { all: ['node', 'pool', 'configVersion', 'configImage'], required: ['node', 'pool', 'configVersion'] },
  MCOObjectReference: { all: ['name'], required: ['name'] },
  MachineConfigNodeSpecMachineConfigVersion: { all: ['desired'], required: ['desired'] },
  MachineConfigNodeStatus: { all: ['conditions', 'observedGeneration', 'configVersion', 'configImage', 'pinnedImageSets', 'irreconcilableChanges', 'internalReleaseImage'], required: [] },
  MachineConfigNodeStatusMachineConfigVersion: { all: ['current', 'desired'], required: ['current', 'desired'] },
  MachineConfigNodeStatusPinnedImageSet: { all: ['name', 'currentGeneration', 'desiredGeneration', 'lastFailedGeneration', 'lastFailedGenerationError'], required: ['name'] },
  IrreconcilableChangeDiff: { all: ['fieldPath', 'diff'], required: [] },
  Condition: { all: ['type', 'status', 'observedGeneration', 'lastTransitionTime', 'reason', 'message'], required: ['type', 'status', 'lastTransitionTime', 'reason', 'message'] },
};

type Obj = Record<string, unknown>;

/** `o` has only the fields of MCO's Go type `type`, and all of its required ones. */
export function checkFields(what: string, o: unknown, type: keyof typeof MCO_MCN_FIELDS): void {
  assert.ok(o && typeof o === 'object' && !Array.isArray(o), `${what} is an object`);
  const keys = Object.keys(o as Obj);
  const { all, required } = MCO_MCN_FIELDS[type]!;
  assert.deepEqual(keys.filter((k) => !all.includes(k)), [], `${what}: every field is one of MCO's ${type}`);
  assert.deepEqual(required.filter((k) => !keys.includes(k)), [], `${what}: MCO's required ${type} fields`);
}

/** Every object of a MachineConfigNode (as `-o yaml` prints it) has only MCO's fields, and its required ones. */
export function assertMcoMachineConfigNodeShape(o: unknown): void {
  checkFields('MachineConfigNode', o, 'MachineConfigNode');
  const spec = (o as Obj).spec as Obj;
  checkFields('spec', spec, 'MachineConfigNodeSpec');
  checkFields('spec.node', spec.node, 'MCOObjectReference');
  checkFields('spec.pool', spec.pool, 'MCOObjectReference');
  checkFields('spec.configVersion', spec.configVersion, 'MachineConfigNodeSpecMachineConfigVersion');
  const status = (o as Obj).status as Obj;
  checkFields('status', status, 'MachineConfigNodeStatus');
  if (status.configVersion !== undefined) checkFields('status.configVersion', status.configVersion, 'MachineConfigNodeStatusMachineConfigVersion');
  const conditions = (status.conditions ?? []) as Obj[];
  assert.ok(conditions.length <= 20, 'conditions: MaxItems=20');
  for (const c of conditions) {
    checkFields(`condition ${String(c.type)}`, c, 'Condition');
    assert.match(String(c.lastTransitionTime), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, `condition ${String(c.type)}: RFC 3339 time`);
    assert.ok(['True', 'False', 'Unknown'].includes(String(c.status)), `condition ${String(c.type)}: status`);
    assert.ok(String(c.message).length <= 32768, `condition ${String(c.type)}: message MaxLength=32768`);
  }
  for (const [i, s] of ((status.pinnedImageSets ?? []) as Obj[]).entries()) checkFields(`pinnedImageSets[${i}]`, s, 'MachineConfigNodeStatusPinnedImageSet');
  for (const [i, d] of ((status.irreconcilableChanges ?? []) as Obj[]).entries()) checkFields(`irreconcilableChanges[${i}]`, d, 'IrreconcilableChangeDiff');
}
