// Staging before the drain (issue 32), the control plane's half: which updates need the node to
// download first (an OS image, a kernel type's or an extension's packages), and how many nodes
// may download at once (spec.rollout.maxStaging). The agent's half is src/agent/os-staging.ts.

import type { MachineConfigPool, MachineConfigSpec } from './types.ts';

/** Whether going from `from` (undefined: a node with no config) to `to` makes rpm-ostree download anything. */
export function needsStaging(from: MachineConfigSpec | undefined, to: MachineConfigSpec): boolean {
  if (to.osImageURL && to.osImageURL !== (from?.osImageURL ?? '')) return true;
  if (to.kernelType !== 'default' && to.kernelType !== (from?.kernelType ?? 'default')) return true;
  return to.extensions.some((e) => !(from?.extensions ?? []).includes(e));
}

/** Staging is on unless the pool turns it off (spec.rollout.staging: Disabled). */
export function stagingEnabled(pool: MachineConfigPool): boolean {
  return pool.spec.rollout?.staging !== 'Disabled';
}

/** spec.rollout.maxStaging against the pool's size; Infinity without one (every node the rollout will reach). */
export function resolveMaxStaging(value: number | string | undefined, poolSize: number): number {
  if (value === undefined) return Infinity;
  if (typeof value === 'number') return value;
  return Math.max(1, Math.floor((Number(value.slice(0, -1)) * poolSize) / 100));
}
