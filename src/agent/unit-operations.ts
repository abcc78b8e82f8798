// Enablement, masks and disruption actions for the units of a config, over D-Bus. Unit files
// themselves are written by the file transaction; this runs after it, around daemon-reload.

import { UpdateStepError, type DisruptionAction, type IgnitionUnit, type MachineConfigSpec } from '../machineconfig/index.ts';
import type { SystemdClient } from './systemd-client.ts';

const unitsOf = (spec: MachineConfigSpec | null): Map<string, IgnitionUnit> =>
  new Map((spec?.config.systemd.units ?? []).map((u) => [u.name, u]));

const wrap = async (step: string, object: string, fn: () => Promise<unknown>): Promise<void> => {
  try {
    await fn();
  } catch (err) {
    throw new UpdateStepError(step, object, (err as Error).message);
  }
};

/** Before the files change: stop and disable units the new config no longer has (while their files exist). */
export async function retireRemovedUnits(systemd: SystemdClient, from: MachineConfigSpec | null, to: MachineConfigSpec): Promise<void> {
  const next = unitsOf(to);
  for (const [name, unit] of unitsOf(from)) {
    if (next.has(name)) continue;
    if (unit.mask) await wrap('apply', `unit ${name}`, () => systemd.unmaskUnitFiles([name]));
    if (unit.enabled) await wrap('apply', `unit ${name}`, () => systemd.disableUnitFiles([name]));
    if (unit.contents !== undefined) await wrap('apply', `unit ${name}`, () => systemd.stopUnit(name));
  }
}

/** After the files change: daemon-reload, then masks, unmasks, enables and disables. */
export async function applyUnitStates(systemd: SystemdClient, from: MachineConfigSpec | null, to: MachineConfigSpec, unitFilesChanged: boolean): Promise<void> {
  if (unitFilesChanged) await wrap('apply', 'systemd daemon-reload', () => systemd.reload());
  const before = unitsOf(from);
  let changed = false;
  for (const unit of to.config.systemd.units) {
    const object = `unit ${unit.name}`;
    if (unit.mask) {
      // A masked unit keeps running until stopped; stop it first.
      await wrap('apply', object, () => systemd.stopUnit(unit.name).catch(() => undefined));
      await wrap('apply', object, () => systemd.maskUnitFiles([unit.name]));
      changed = true;
      continue;
    }
    if (before.get(unit.name)?.mask) {
      await wrap('apply', object, () => systemd.unmaskUnitFiles([unit.name]));
      changed = true;
    }
    if (unit.enabled === true) {
      await wrap('apply', object, () => systemd.enableUnitFiles([unit.name]));
      changed = true;
    } else if (unit.enabled === false) {
      await wrap('apply', object, () => systemd.disableUnitFiles([unit.name]));
      changed = true;
    }
  }
  if (changed) await wrap('apply', 'systemd daemon-reload', () => systemd.reload());
}

/** The disruption policy's actions, in order (daemon-reload, reloads, restarts). */
export async function runActions(systemd: SystemdClient, actions: DisruptionAction[]): Promise<void> {
  for (const a of actions) {
    if (a.type === 'daemon-reload') await wrap('actions', 'systemd daemon-reload', () => systemd.reload());
    if (a.type === 'reload') await wrap('actions', `unit ${a.unit}`, () => systemd.reloadUnit(a.unit!));
    if (a.type === 'restart') await wrap('actions', `unit ${a.unit}`, () => systemd.restartUnit(a.unit!));
  }
}

/** Unit mismatches for validation: enablement and masks as systemd reports them. */
export async function unitMismatches(systemd: SystemdClient, spec: MachineConfigSpec): Promise<string[]> {
  const out: string[] = [];
  for (const unit of spec.config.systemd.units) {
    const state = await systemd.unitFileState(unit.name);
    if (unit.mask && state !== 'masked') out.push(`unit ${unit.name}: expected masked, systemd says ${state}`);
    else if (!unit.mask && state === 'masked') out.push(`unit ${unit.name}: expected not masked, systemd says masked`);
    else if (unit.enabled === true && !state.startsWith('enabled')) out.push(`unit ${unit.name}: expected enabled, systemd says ${state}`);
    else if (unit.enabled === false && state.startsWith('enabled')) out.push(`unit ${unit.name}: expected disabled, systemd says ${state}`);
  }
  return out;
}
