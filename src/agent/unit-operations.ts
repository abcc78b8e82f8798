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

/**
 * The units whose state `to` sets and `from` does not pin (not in `from`, or there without
 * enabled or mask): their unit file states before the update, so an undo can put them back.
 */
export async function unitStatesToRemember(systemd: SystemdClient, from: MachineConfigSpec | null, to: MachineConfigSpec): Promise<Record<string, string>> {
  const before = unitsOf(from);
  const out: Record<string, string> = {};
  for (const unit of to.config.systemd.units) {
    const old = before.get(unit.name);
    if (old && (old.enabled !== undefined || old.mask)) continue;
    if (unit.enabled === undefined && !unit.mask) continue;
    out[unit.name] = await systemd.unitFileState(unit.name);
  }
  return out;
}

/**
 * Before an update's files are taken back: what it did to units the config it leaves does not
 * pin. A unit whose file it created (`created`) and enabled is disabled while the file still
 * exists (once it is gone systemd cannot disable it, and its default.target.wants link would
 * dangle) and stopped; a mask it added is lifted. Any other unit it enabled, disabled or masked
 * goes back to the state remembered before (`remembered`, from unitStatesToRemember). The units
 * the old config pins get their states back from applyUnitStates(to, from) afterwards.
 */
export async function undoAddedUnits(systemd: SystemdClient, from: MachineConfigSpec | null, to: MachineConfigSpec, created: Set<string>, remembered: Record<string, string>): Promise<void> {
  const before = unitsOf(from);
  for (const unit of to.config.systemd.units) {
    const old = before.get(unit.name);
    const object = `unit ${unit.name}`;
    if (created.has(unit.name) && !old) {
      if (unit.mask) await wrap('rollback', object, () => systemd.unmaskUnitFiles([unit.name]));
      if (unit.enabled === true && (await systemd.unitFileState(unit.name)).startsWith('enabled')) {
        await wrap('rollback', object, () => systemd.disableUnitFiles([unit.name]));
      }
      await systemd.stopUnit(unit.name).catch(() => undefined);
      continue;
    }
    const was = remembered[unit.name];
    if (was === undefined) {
      if (unit.mask && !old?.mask) await wrap('rollback', object, () => systemd.unmaskUnitFiles([unit.name]));
      continue;
    }
    let now = await systemd.unitFileState(unit.name);
    if (now === 'masked' && was !== 'masked') {
      await wrap('rollback', object, () => systemd.unmaskUnitFiles([unit.name]));
      now = await systemd.unitFileState(unit.name);
    }
    if (was === 'masked' && now !== 'masked') await wrap('rollback', object, () => systemd.maskUnitFiles([unit.name]));
    else if (was.startsWith('enabled') && !now.startsWith('enabled')) await wrap('rollback', object, () => systemd.enableUnitFiles([unit.name]));
    else if (!was.startsWith('enabled') && was !== 'masked' && now.startsWith('enabled')) await wrap('rollback', object, () => systemd.disableUnitFiles([unit.name]));
  }
}

/**
 * After the files change: daemon-reload, then masks, unmasks, enables and disables, each one
 * D-Bus call for all the units it concerns (systemctl would reload systemd once per unit).
 */
export async function applyUnitStates(systemd: SystemdClient, from: MachineConfigSpec | null, to: MachineConfigSpec, unitFilesChanged: boolean): Promise<void> {
  if (unitFilesChanged) await wrap('apply', 'systemd daemon-reload', () => systemd.reload());
  const before = unitsOf(from);
  const mask: string[] = [];
  const unmask: string[] = [];
  const enable: string[] = [];
  const disable: string[] = [];
  for (const unit of to.config.systemd.units) {
    if (unit.mask) {
      mask.push(unit.name);
      continue;
    }
    if (before.get(unit.name)?.mask) unmask.push(unit.name);
    if (unit.enabled === true) enable.push(unit.name);
    else if (unit.enabled === false) disable.push(unit.name);
  }
  // A masked unit keeps running until stopped; stop it first (a unit not running is fine).
  await Promise.all(mask.map((name) => systemd.stopUnit(name).catch(() => undefined)));
  const named = (names: string[]): string => (names.length === 1 ? `unit ${names[0]}` : `units ${names.join(', ')}`);
  if (mask.length) await wrap('apply', named(mask), () => systemd.maskUnitFiles(mask));
  if (unmask.length) await wrap('apply', named(unmask), () => systemd.unmaskUnitFiles(unmask));
  if (enable.length) await wrap('apply', named(enable), () => systemd.enableUnitFiles(enable));
  if (disable.length) await wrap('apply', named(disable), () => systemd.disableUnitFiles(disable));
  if (mask.length + unmask.length + enable.length + disable.length) await wrap('apply', 'systemd daemon-reload', () => systemd.reload());
}

/**
 * The disruption policy's actions: daemon-reload first, then every reload, then every restart;
 * the jobs of one kind run at once (systemd orders them by their dependencies anyway).
 */
export async function runActions(systemd: SystemdClient, actions: DisruptionAction[]): Promise<void> {
  if (actions.some((a) => a.type === 'daemon-reload')) await wrap('actions', 'systemd daemon-reload', () => systemd.reload());
  for (const type of ['reload', 'restart'] as const) {
    const units = actions.filter((a) => a.type === type).map((a) => a.unit!);
    const results = await Promise.allSettled(units.map((unit) =>
      wrap('actions', `unit ${unit}`, () => (type === 'reload' ? systemd.reloadUnit(unit) : systemd.restartUnit(unit)))));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }
}

export interface UnitMismatch {
  unit: string;
  expected: 'masked' | 'not masked' | 'enabled' | 'disabled';
  /** The unit file state systemd reports. */
  actual: string;
}

/** Enablement and masks that differ from the config, as systemd reports them. */
export async function unitMismatches(systemd: SystemdClient, spec: MachineConfigSpec): Promise<UnitMismatch[]> {
  const out: UnitMismatch[] = [];
  for (const unit of spec.config.systemd.units) {
    const actual = await systemd.unitFileState(unit.name);
    if (unit.mask && actual !== 'masked') out.push({ unit: unit.name, expected: 'masked', actual });
    else if (!unit.mask && actual === 'masked') out.push({ unit: unit.name, expected: 'not masked', actual });
    else if (unit.enabled === true && !actual.startsWith('enabled')) out.push({ unit: unit.name, expected: 'enabled', actual });
    else if (unit.enabled === false && actual.startsWith('enabled')) out.push({ unit: unit.name, expected: 'disabled', actual });
  }
  return out;
}

export function describeUnitMismatch(m: UnitMismatch): string {
  return `unit ${m.unit}: expected ${m.expected}, systemd says ${m.actual}`;
}
