// The walk over a disruption policy's files, units and sshkey, shared by a pool's
// spec.disruptionPolicy (mcplane's action spelling, MCO's accepted too) and
// MachineConfiguration/cluster's spec.nodeDisruptionPolicy (MCO's alone). Both follow MCO's
// rules for the entries: absolute paths, valid unit names, one entry per path and per unit, at
// most 50 of each. Only how an action list is read differs, so that is the caller's.

import { quote } from './control-characters.ts';
import { join, type ProblemCollector } from './problem-collector.ts';
import type { DisruptionAction, DisruptionPolicy } from './types.ts';

/** MCO's limits: +kubebuilder:validation:MaxItems on files and units, and on each actions list. */
const MAX_ENTRIES = 50;
export const MAX_POLICY_ACTIONS = 10;
/** NodeDisruptionPolicyServiceName: ${NAME}${SERVICETYPE}, at most 255 characters. */
const SERVICE_NAME = /^[a-zA-Z0-9:._\\-]+\.(service|socket|device|mount|automount|swap|target|path|timer|snapshot|slice|scope)$/;
const SERVICE_NAME_RULE = 'a unit name such as crio.service: letters, digits, ":", "-", "_", "." and "\\", then one of .service, .socket, .device, .mount, .automount, .swap, .target, .path, .timer, .snapshot, .slice or .scope, at most 255 characters';

export type ActionsParser = (raw: unknown, c: ProblemCollector, field: string) => DisruptionAction[] | undefined;

/** The policy at `field`; an absent one is an empty policy. */
export function parseDisruptionPolicyEntries(raw: unknown, c: ProblemCollector, field: string, parseActions: ActionsParser): DisruptionPolicy {
  const out: DisruptionPolicy = {};
  const p = c.record(raw, field);
  if (!p) return out;
  c.onlyKeys(p, field, ['files', 'units', 'sshkey']);

  const files = c.array(p.files, field, 'files');
  if (files) {
    if (files.length > MAX_ENTRIES) c.add(join(field, 'files'), 'max-items', `at most ${MAX_ENTRIES} file entries, got ${files.length}`);
    const seen = new Set<string>();
    out.files = [];
    files.forEach((rawEntry, i) => {
      const f = `${field}.files[${i}]`;
      const entry = c.record(rawEntry, f);
      if (!entry) return;
      c.onlyKeys(entry, f, ['path', 'actions']);
      const path = c.string(entry.path, f, 'path');
      if (path === undefined) c.add(join(f, 'path'), 'required', 'a file entry needs the path it covers');
      else if (!path.startsWith('/')) c.add(join(f, 'path'), 'path-absolute', `path ${quote(path, 100)} must be absolute (start with /)`);
      else if (seen.has(path)) c.add(join(f, 'path'), 'duplicate-entry', `path ${quote(path, 100)} is listed twice; each path may have one entry`);
      if (path) seen.add(path);
      const actions = parseActions(entry.actions, c, join(f, 'actions'));
      if (path && actions) out.files!.push({ path, actions });
    });
  }

  const units = c.array(p.units, field, 'units');
  if (units) {
    if (units.length > MAX_ENTRIES) c.add(join(field, 'units'), 'max-items', `at most ${MAX_ENTRIES} unit entries, got ${units.length}`);
    const seen = new Set<string>();
    out.units = [];
    units.forEach((rawEntry, i) => {
      const f = `${field}.units[${i}]`;
      const entry = c.record(rawEntry, f);
      if (!entry) return;
      c.onlyKeys(entry, f, ['name', 'actions']);
      const name = unitName(entry.name, c, join(f, 'name'));
      if (name && seen.has(name)) c.add(join(f, 'name'), 'duplicate-entry', `unit "${name}" is listed twice; each unit may have one entry`);
      if (name) seen.add(name);
      const actions = parseActions(entry.actions, c, join(f, 'actions'));
      if (name && actions) out.units!.push({ name, actions });
    });
  }

  const ssh = c.record(p.sshkey, field, 'sshkey');
  if (ssh) {
    c.onlyKeys(ssh, join(field, 'sshkey'), ['actions']);
    const actions = parseActions(ssh.actions, c, join(field, 'sshkey.actions'));
    if (actions) out.sshkey = { actions };
  }
  return out;
}

/** A unit name as MCO's policy takes it; undefined (and a problem) when it is not one. */
export function unitName(raw: unknown, c: ProblemCollector, field: string): string | undefined {
  const name = c.string(raw, field);
  if (name === undefined) {
    if (raw === undefined || raw === null) c.add(field, 'required', 'a unit name is required');
    return undefined;
  }
  if (name.length > 255 || !SERVICE_NAME.test(name)) {
    c.add(field, 'service-name', `${quote(name, 100)} is not ${SERVICE_NAME_RULE}`);
    return undefined;
  }
  return name;
}
