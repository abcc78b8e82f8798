// A pool's status as MCO writes it on a MachineConfigPool's status subresource, so `oc get mcp`,
// `oc wait mcp/worker --for=condition=Updated` and dashboards that read MCO's fields keep
// working: observedGeneration, configuration {name, source}, the five machine counts and the
// conditions (Updated, Updating, Degraded, NodeDegraded, RenderDegraded) with RFC 3339 times.

import { API_VERSION, KIND_MACHINE_CONFIG, type Condition, type PoolStatus, type Problem } from '../../machineconfig/index.ts';
import { formatProblem } from '../../machineconfig/index.ts';

export interface McoPoolStatus {
  observedGeneration: number;
  configuration: { name: string; source: { apiVersion: string; kind: string; name: string }[] };
  machineCount: number;
  updatedMachineCount: number;
  readyMachineCount: number;
  unavailableMachineCount: number;
  degradedMachineCount: number;
  conditions: { type: string; status: string; reason: string; message: string; lastTransitionTime: string }[];
}

function rfc3339(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
}

export function mcoPoolStatus(generation: number, status: PoolStatus): McoPoolStatus {
  return {
    observedGeneration: generation,
    configuration: {
      name: status.configuration,
      source: status.configurationSources.map((name) => ({ apiVersion: API_VERSION, kind: KIND_MACHINE_CONFIG, name })),
    },
    machineCount: status.machineCount,
    updatedMachineCount: status.updatedMachineCount,
    readyMachineCount: status.readyMachineCount,
    unavailableMachineCount: status.unavailableMachineCount,
    degradedMachineCount: status.degradedMachineCount,
    conditions: status.conditions.map((c: Condition) => ({
      type: c.type, status: c.status, reason: c.reason, message: c.message, lastTransitionTime: rfc3339(c.lastTransitionTime),
    })),
  };
}

/**
 * For a MachineConfigPool in the cluster that mcplane could not take at all (invalid, never
 * stored): nothing rendered, nothing counted, and the reason in RenderDegraded and Degraded.
 */
export function mcoInvalidPoolStatus(generation: number, problems: Problem[], previous: McoPoolStatus['conditions'] | undefined): McoPoolStatus {
  const message = `the MachineConfigPool is invalid and was not taken: ${problems.map(formatProblem).join('; ')}`;
  const since = (type: string, status: string): string => {
    const old = previous?.find((c) => c.type === type);
    return old && old.status === status ? old.lastTransitionTime : rfc3339(Date.now());
  };
  const cond = (type: string, status: string, reason: string, text: string) => ({ type, status, reason, message: text, lastTransitionTime: since(type, status) });
  return {
    observedGeneration: generation,
    configuration: { name: '', source: [] },
    machineCount: 0, updatedMachineCount: 0, readyMachineCount: 0, unavailableMachineCount: 0, degradedMachineCount: 0,
    conditions: [
      cond('RenderDegraded', 'True', 'RenderFailed', message),
      cond('NodeDegraded', 'False', 'NoNodesDegraded', 'no node is degraded'),
      cond('Degraded', 'True', 'RenderFailed', message),
      cond('Updated', 'False', 'NodesNotUpdated', 'no rendered config yet'),
      cond('Updating', 'False', 'NotRendered', 'nothing to roll out until the pool is valid'),
    ],
  };
}
