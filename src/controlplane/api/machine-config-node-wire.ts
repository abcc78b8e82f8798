// A MachineConfigNode on the wire (status.proto's MachineConfigNode): the builder's object as it
// is, times in Unix ms; a generation of 0 stands for one MCO leaves out.

import type { MachineConfigNode } from '../../machineconfig/machine-config-node.ts';
import type { MachineConfigNode as WireMachineConfigNode } from '../../runtime/generated/mcplane/v1/MachineConfigNode.ts';

export function machineConfigNodeToWire(m: MachineConfigNode): WireMachineConfigNode {
  return {
    name: m.name,
    pool: m.pool,
    creationTimeUnixMs: m.creationTime,
    desiredConfig: m.desiredConfig,
    status: {
      currentConfig: m.status.currentConfig,
      desiredConfig: m.status.desiredConfig,
      observedGeneration: m.status.observedGeneration,
      conditions: m.status.conditions.map((c) => ({ type: c.type, status: c.status, reason: c.reason, message: c.message, lastTransitionTimeUnixMs: c.lastTransitionTime })),
      pinnedImageSets: m.status.pinnedImageSets.map((p) => ({
        name: p.name,
        desiredGeneration: p.desiredGeneration ?? 0,
        currentGeneration: p.currentGeneration ?? 0,
        lastFailedGeneration: p.lastFailedGeneration ?? 0,
        lastFailedGenerationError: p.lastFailedGenerationError ?? '',
      })),
      irreconcilableChanges: m.status.irreconcilableChanges.map((c) => ({ fieldPath: c.fieldPath, diff: c.diff })),
    },
  };
}
