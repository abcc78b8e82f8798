// When each node of a pool would get a new target: its batch, its place in MCO's zone/oldest
// order, and the window it goes in. It replays decideRollout itself, batch after batch, with
// every batch finishing before the next is decided, so the preview follows the same rules
// (maxUnavailable, group budgets, windows, canaries and their soak) as the rollout it predicts.
// Each batch takes `batchMs` (what the pool's recent updates took): a batch that would start after
// its window closed waits for the next one, as the rollout makes it.

import { decideRollout, isDisruptive, type RolloutContext } from './rollout.ts';
import { rolloutOrder } from './rollout-order.ts';
import type { RolloutState } from './rollout-failures.ts';
import { waitsForWindow, windowState } from './maintenance-window.ts';
import type { MachineConfigPool, NodeRecord } from './types.ts';

export interface NodeSchedule {
  node: string;
  /** 1 for the first nodes to go; 0 when the node would not get the target (see `note`). */
  batch: number;
  /** 1-based place among the pool's nodes that need the target, in zone/oldest order. */
  order: number;
  /** When its batch may start, as far as windows tell (the time passed in, or a window's start). */
  startsAt: number;
  /** The maintenance window its batch goes in (or waits for): undefined when it waits for none. */
  window: { open: boolean; start?: number; closesAt?: number } | undefined;
  /** Why it has no batch: paused pool, disconnected, already on the target. */
  note: string;
}

export function previewRollout(pool: MachineConfigPool, target: string, nodes: readonly NodeRecord[], context: RolloutContext, batchMs = 0): NodeSchedule[] {
  const pending = nodes.filter((n) => n.desiredConfig !== target).sort(rolloutOrder);
  const order = new Map(pending.map((n, i) => [n.name, i + 1]));
  const windows = pool.spec.maintenanceWindows?.length ? windowState(pool.spec.maintenanceWindows, context.now) : undefined;
  const out = new Map<string, NodeSchedule>();
  for (const n of nodes) {
    const action = context.actionOf?.(n);
    const waits = waitsForWindow(pool.spec, isDisruptive(action));
    const window = waits && windows ? (windows.open ? { open: true, ...(windows.closesAt !== undefined ? { closesAt: windows.closesAt } : {}) } : { open: false, ...(windows.nextStart !== undefined ? { start: windows.nextStart } : {}) }) : undefined;
    const note = n.desiredConfig === target ? 'already assigned the target' : pool.spec.paused ? 'pool is paused' : !n.connected ? 'disconnected: gets it when it reconnects' : 'not reached within the preview';
    out.set(n.name, { node: n.name, batch: 0, order: order.get(n.name) ?? 0, startsAt: context.now, window, note });
  }

  let sim = nodes.map((n) => structuredClone(n));
  let now = context.now;
  const finishAll = (): boolean => {
    let any = false;
    sim = sim.map((n) => {
      if (!n.connected || (n.desiredConfig === n.status.currentConfig && n.status.state !== 'Working')) return n;
      any = true;
      return { ...n, status: { ...n.status, currentConfig: n.desiredConfig, state: 'Done' } };
    });
    return any;
  };
  let batch = 0;
  // A new target starts a new rollout: no soak begun, no halt (the breaker cannot be foreseen).
  let state: RolloutState = {};
  for (let step = 0; step < nodes.length * 3 + 10; step++) {
    const d = decideRollout(pool, target, sim, { ...context, now, ...(pool.spec.rollout ? { rolloutState: state } : {}) });
    state = d.canary?.soak ? { soak: d.canary.soak } : {};
    if (d.assign.length) {
      batch++;
      const assigned = new Set(d.assign);
      // The window the batch starts in (it was open, or the batch would have been held).
      const open = windows ? windowState(pool.spec.maintenanceWindows!, now) : undefined;
      for (const name of d.assign) {
        const s = out.get(name)!;
        s.batch = batch;
        s.startsAt = now;
        s.note = '';
        // Open at the preview's time: "open until"; a later window: when it opens.
        if (s.window && open?.open) s.window = open.openedAt! <= context.now ? { open: true, closesAt: open.closesAt! } : { open: false, start: open.openedAt!, closesAt: open.closesAt! };
      }
      sim = sim.map((n) => (assigned.has(n.name) ? { ...n, desiredConfig: target } : n));
      finishAll();
      now += batchMs;
      continue;
    }
    if (finishAll()) continue; // nodes updating now use the budget until they finish
    if (d.canary?.soakEndsAt !== undefined && d.canary.soakEndsAt > now) {
      now = d.canary.soakEndsAt; // the rest go once the canaries have soaked
      continue;
    }
    if (d.heldForWindow.length && d.nextWindowStart !== undefined && d.nextWindowStart > now) {
      now = d.nextWindowStart;
      continue;
    }
    break;
  }
  return nodes.map((n) => out.get(n.name)!);
}
