// Staging before the drain (issue 32), the control plane's half: which updates need the node to
// download first (an OS image, a kernel type's or an extension's packages), and how many nodes
// may download at once (spec.rollout.maxStaging). The agent's half is src/agent/os-staging.ts.

import { windowState } from './maintenance-window.ts';
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

/** When one node downloads, as the preview says it. */
export interface StagingSchedule {
  /** Whether its update downloads anything (and the pool stages). */
  needed: boolean;
  /** When it is asked to stage: now or a download window's start; undefined when it waits for nodes ahead (maxStaging). */
  at?: number;
  /** Nodes ahead of it that must finish staging first (maxStaging), 0 when none. */
  after: number;
}

/**
 * When each node of `ordered` (the rollout order; `needs` says which download) is asked to stage:
 * the first maxStaging at once (or when the next download window opens), each further one when
 * a node ahead has staged, which the preview cannot foresee (the download's length is unknown),
 * so it says how many are ahead.
 */
export function previewStaging(pool: MachineConfigPool, ordered: readonly string[], needs: (node: string) => boolean, now: number): Map<string, StagingSchedule> {
  const out = new Map<string, StagingSchedule>();
  const on = stagingEnabled(pool);
  const max = resolveMaxStaging(pool.spec.rollout?.maxStaging, ordered.length);
  const windows = pool.spec.downloadWindows?.length ? windowState(pool.spec.downloadWindows, now) : undefined;
  const start = !windows || windows.open ? now : windows.nextStart;
  let i = 0;
  for (const node of ordered) {
    if (!on || !needs(node)) {
      out.set(node, { needed: false, after: 0 });
      continue;
    }
    const ahead = i < max ? 0 : i - max + 1;
    out.set(node, ahead === 0 && start !== undefined ? { needed: true, at: start, after: 0 } : { needed: true, after: ahead });
    i++;
  }
  return out;
}
