// What changes between two rendered configs, by category, and what that change costs a node
// (MCO's node disruption policy). Pure, so the control plane can answer "will this reboot?"
// before anything reaches a host, and the agent acts on exactly the same answer.

import { BUILTIN_DISRUPTION_POLICY, withBuiltinPolicy } from './builtin-disruption-policy.ts';
import { canonicalJson } from './canonical-json.ts';
import { decodeDataUrl } from './data-url.ts';
import { TomlSyntaxError } from './errors.ts';
import { REGISTRIES_CONF_PATH } from './registries-config.ts';
import { registriesChangeVerdict, type RegistriesChangeVerdict } from './registries-drain.ts';
import type {
  DisruptionAction,
  DisruptionPolicy,
  IgnitionFile,
  IgnitionUnit,
  MachineConfigSpec,
} from './types.ts';

export type ChangeKind = 'added' | 'changed' | 'removed';

export interface ConfigDiff {
  /** `registries`: for /etc/containers/registries.conf, whether MCO counts the change safe (no drain) and why. */
  files: { path: string; change: ChangeKind; registries?: RegistriesChangeVerdict }[];
  units: { name: string; change: ChangeKind }[];
  sshKeys: boolean;
  passwordHash: boolean;
  kernelArguments: { remove: string[]; add: string[] };
  kernelType: boolean;
  extensions: { remove: string[]; add: string[] };
  osImageURL: boolean;
  fips: boolean;
}

export interface DisruptionPlan {
  reboot: boolean;
  /** Why a reboot is needed, one line per cause ("file /etc/chrony.conf: no disruption policy"). */
  rebootReasons: string[];
  /** Without a reboot: daemon-reload first, then reloads, then restarts, then drain, each once. */
  actions: DisruptionAction[];
  /** Each change and the rule that decided what it costs, so a preview can say why. */
  decisions: ChangeDecision[];
}

/** A policy entry that decided a change: `files` by path prefix, `units` by name, or `sshkey`. */
export interface PolicyEntryRef {
  kind: 'files' | 'units' | 'sshkey';
  /** MCO's built-in policy decided (builtin-disruption-policy.ts), not an entry the user wrote. */
  builtin?: true;
  /** The entry's path prefix or unit name; "" for sshkey. */
  key: string;
}

export interface ChangeDecision {
  /** "file /etc/chrony.conf changed", "kernelArguments changed", "core SSH keys changed". */
  change: string;
  /** What this change alone costs; a reboot is [{type: 'reboot'}]. */
  actions: DisruptionAction[];
  /** The policy entry that decided it; absent when MCO's default did. */
  entry?: PolicyEntryRef;
  /** Why, in words: the default and its reason, or which entry matched. */
  rule: string;
}

/**
 * The one word for what an update costs a node, most disruptive first: what the preview shows,
 * what windows and drains gate on. A reboot always drains; a `drain` action drains without one.
 */
export type UpdateAction = 'reboot' | 'drain' | 'restart' | 'reload' | 'daemon-reload' | 'none';

export function updateActionOf(plan: DisruptionPlan): UpdateAction {
  if (plan.reboot) return 'reboot';
  for (const type of ['drain', 'restart', 'reload', 'daemon-reload'] as const) {
    if (plan.actions.some((a) => a.type === type)) return type;
  }
  return 'none';
}

/** True when the node must be drained before the update (and cordoned while it runs). */
export function needsDrain(plan: DisruptionPlan): boolean {
  return plan.reboot || plan.actions.some((a) => a.type === 'drain');
}

export function diffSpecs(from: MachineConfigSpec | undefined, to: MachineConfigSpec): ConfigDiff {
  const oldFiles = new Map((from?.config.storage.files ?? []).map((f) => [f.path, f]));
  const newFiles = new Map(to.config.storage.files.map((f) => [f.path, f]));
  const oldUnits = new Map((from?.config.systemd.units ?? []).map((u) => [u.name, u]));
  const newUnits = new Map(to.config.systemd.units.map((u) => [u.name, u]));
  const oldCore = from?.config.passwd.users.find((u) => u.name === 'core');
  const newCore = to.config.passwd.users.find((u) => u.name === 'core');
  const oldKargs = splitKernelArguments(from?.kernelArguments ?? []);
  const newKargs = splitKernelArguments(to.kernelArguments);
  const oldExt = from?.extensions ?? [];
  return {
    files: keyedChanges(oldFiles, newFiles, sameFile).map(([path, change]) => (path === REGISTRIES_CONF_PATH
      ? { path, change, registries: registriesVerdict(oldFiles.get(path), newFiles.get(path)) }
      : { path, change })),
    units: keyedChanges(oldUnits, newUnits, sameUnit).map(([name, change]) => ({ name, change })),
    sshKeys: !sameList(oldCore?.sshAuthorizedKeys ?? [], newCore?.sshAuthorizedKeys ?? []),
    passwordHash: (oldCore?.passwordHash ?? '') !== (newCore?.passwordHash ?? ''),
    kernelArguments: { remove: oldKargs.filter((k) => !newKargs.includes(k)), add: newKargs.filter((k) => !oldKargs.includes(k)) },
    kernelType: (from?.kernelType ?? 'default') !== to.kernelType,
    extensions: { remove: oldExt.filter((e) => !to.extensions.includes(e)), add: to.extensions.filter((e) => !oldExt.includes(e)) },
    osImageURL: (from?.osImageURL ?? '') !== to.osImageURL,
    fips: (from?.fips ?? false) !== to.fips,
  };
}

export function isEmptyDiff(d: ConfigDiff): boolean {
  return d.files.length === 0 && d.units.length === 0 && !d.sshKeys && !d.passwordHash &&
    d.kernelArguments.remove.length === 0 && d.kernelArguments.add.length === 0 && !d.kernelType &&
    d.extensions.remove.length === 0 && d.extensions.add.length === 0 && !d.osImageURL && !d.fips;
}

/**
 * MCO's defaults: OS image, kernel arguments, kernel type, extensions and FIPS always reboot; a
 * file or unit change reboots unless the policy covers it (longest path prefix wins, units by
 * exact name); SSH keys and the password need nothing. Any reboot wins over every other action.
 */
export function planDisruption(diff: ConfigDiff, userPolicy: DisruptionPolicy | undefined): DisruptionPlan {
  // MCO's built-in policies apply under the user's (same path or unit: the user's wins).
  const policy = withBuiltinPolicy(userPolicy);
  const rebootReasons: string[] = [];
  const actions: DisruptionAction[] = [];
  const decisions: ChangeDecision[] = [];
  const reboot: DisruptionAction[] = [{ type: 'reboot' }];
  const always = (changed: boolean, what: string): void => {
    if (!changed) return;
    rebootReasons.push(`${what} changed`);
    decisions.push({ change: `${what} changed`, actions: reboot, rule: `default: ${what} changes always reboot (no policy can change that)` });
  };
  always(diff.osImageURL, 'osImageURL');
  always(diff.kernelArguments.add.length > 0 || diff.kernelArguments.remove.length > 0, 'kernelArguments');
  always(diff.kernelType, 'kernelType');
  always(diff.extensions.add.length > 0 || diff.extensions.remove.length > 0, 'extensions');
  always(diff.fips, 'fips');

  const apply = (what: string, matched: { entry: PolicyEntryRef; actions: DisruptionAction[]; rule?: string } | undefined, fallback?: { actions: DisruptionAction[]; rule: string }): void => {
    if (!matched && fallback) {
      decisions.push({ change: what, actions: fallback.actions, rule: fallback.rule });
      actions.push(...fallback.actions);
      return;
    }
    if (!matched) {
      rebootReasons.push(`${what}: no disruption policy covers it`);
      decisions.push({ change: what, actions: reboot, rule: 'default: no disruption policy entry covers it, so it reboots' });
      return;
    }
    const rule = matched.rule ?? `${matched.entry.builtin ? 'built-in policy (MCO\'s default) ' : 'policy '}${matched.entry.kind}${matched.entry.key ? ` ${matched.entry.key}` : ''}`;
    if (matched.actions.some((a) => a.type === 'reboot')) {
      rebootReasons.push(`${what}: policy says reboot`);
      decisions.push({ change: what, actions: reboot, entry: matched.entry, rule });
    } else {
      actions.push(...matched.actions);
      decisions.push({ change: what, actions: orderActions(matched.actions), entry: matched.entry, rule });
    }
  };
  for (const f of diff.files) {
    const matched = fileEntry(f.path, policy);
    if (matched?.entry.builtin && matched.entry.key === REGISTRIES_CONF_PATH && f.path === REGISTRIES_CONF_PATH) {
      // MCO's Special action: reload crio, and drain unless every change is safe (drain.go).
      const verdict = f.registries ?? { safe: false, reason: 'registries.conf changed' };
      apply(`file ${f.path} ${f.change}`, {
        entry: matched.entry,
        actions: verdict.safe ? matched.actions : [...matched.actions, { type: 'drain' }],
        rule: `built-in policy (MCO's Special) files ${REGISTRIES_CONF_PATH}: ${verdict.reason}: reload crio, ${verdict.safe ? 'no drain' : 'drain'}`,
      });
    } else {
      apply(`file ${f.path} ${f.change}`, matched);
    }
  }
  for (const u of diff.units) {
    const entry = policy.units?.find((p) => p.name === u.name);
    apply(`unit ${u.name} ${u.change}`, entry && { entry: { kind: 'units', key: entry.name, ...(policy.builtin.units.has(entry.name) ? { builtin: true as const } : {}) }, actions: entry.actions });
  }
  if (diff.sshKeys) {
    // MCO's built-in sshkey policy is None: what mcplane always did without one.
    apply('core SSH keys changed', !policy.builtin.sshkey && policy.sshkey ? { entry: { kind: 'sshkey', key: '' }, actions: policy.sshkey.actions } : undefined,
      { actions: [], rule: 'default: SSH key changes need no disruption' });
  }
  if (diff.passwordHash) decisions.push({ change: 'core password changed', actions: [], rule: 'default: a password change needs no disruption' });

  if (rebootReasons.length > 0) return { reboot: true, rebootReasons, actions: [], decisions };
  return { reboot: false, rebootReasons, actions: orderActions(actions), decisions };
}

function fileEntry(path: string, policy: ReturnType<typeof withBuiltinPolicy>): { entry: PolicyEntryRef; actions: DisruptionAction[] } | undefined {
  let best: { path: string; actions: DisruptionAction[] } | undefined;
  for (const entry of policy.files ?? []) {
    if (path.startsWith(entry.path) && (!best || entry.path.length > best.path.length)) best = entry;
  }
  return best && { entry: { kind: 'files', key: best.path, ...(policy.builtin.files.has(best.path) ? { builtin: true as const } : {}) }, actions: best.actions };
}

export { BUILTIN_DISRUPTION_POLICY };

function orderActions(actions: DisruptionAction[]): DisruptionAction[] {
  const rank = { 'daemon-reload': 0, reload: 1, restart: 2, drain: 3, none: 4, reboot: 5 } as const;
  const seen = new Set<string>();
  return actions
    .filter((a) => a.type !== 'none')
    .sort((a, b) => rank[a.type] - rank[b.type])
    .filter((a) => {
      const key = `${a.type}:${a.unit ?? ''}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
}

/**
 * Splits kernel arguments the way MCO does: an entry may hold several arguments separated by
 * spaces, and double quotes keep a value with spaces together (`dyndbg="file x +p"`).
 */
export function splitKernelArguments(kargs: readonly string[]): string[] {
  const out: string[] = [];
  for (const entry of kargs) {
    let current = '';
    let quoted = false;
    for (const ch of entry) {
      if (ch === '"') quoted = !quoted;
      if (!quoted && /\s/.test(ch)) {
        if (current) out.push(current);
        current = '';
      } else {
        current += ch;
      }
    }
    if (current) out.push(current);
  }
  return out;
}

/** MCO reads a missing registries.conf as empty (GetIgnitionFileDataByPath gives no data). */
function registriesVerdict(before: IgnitionFile | undefined, after: IgnitionFile | undefined): RegistriesChangeVerdict {
  const text = (f: IgnitionFile | undefined): string => {
    if (!f) return '';
    const d = decodeDataUrl(f.contents.source);
    return 'bytes' in d ? d.bytes.toString('utf8') : '';
  };
  try {
    return registriesChangeVerdict(text(before), text(after));
  } catch (err) {
    if (err instanceof TomlSyntaxError) return { safe: false, reason: `${REGISTRIES_CONF_PATH} does not parse (${err.message})` };
    throw err;
  }
}

function keyedChanges<T>(before: Map<string, T>, after: Map<string, T>, same: (a: T, b: T) => boolean): [string, ChangeKind][] {
  const out: [string, ChangeKind][] = [];
  for (const [key, value] of after) {
    const old = before.get(key);
    if (!old) out.push([key, 'added']);
    else if (!same(old, value)) out.push([key, 'changed']);
  }
  for (const key of before.keys()) if (!after.has(key)) out.push([key, 'removed']);
  return out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

function sameFile(a: IgnitionFile, b: IgnitionFile): boolean {
  return a.mode === b.mode && a.contents.source === b.contents.source &&
    canonicalJson([a.user, a.group]) === canonicalJson([b.user, b.group]);
}

function sameUnit(a: IgnitionUnit, b: IgnitionUnit): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * MCO's rule for its day-1 constructs after install (pkg/controller/common/reconcile.go,
 * isConfigReconcilable): any change to storage.directories is refused; a change to
 * storage.links is refused unless it removes them all (which is allowed, and changes nothing on
 * the host). Returns the field and MCO's reason, or undefined when the change is reconcilable.
 */
export function day1StorageChange(from: MachineConfigSpec, to: MachineConfigSpec): { field: string; reason: string } | undefined {
  const same = (a: unknown[] | undefined, b: unknown[] | undefined): boolean => JSON.stringify(a ?? []) === JSON.stringify(b ?? []);
  if (!same(from.config.storage.directories, to.config.storage.directories)) {
    return { field: 'spec.config.storage.directories', reason: 'ignition directories section contains changes' };
  }
  if (!same(from.config.storage.links, to.config.storage.links) && (to.config.storage.links ?? []).length !== 0) {
    return { field: 'spec.config.storage.links', reason: 'ignition links section contains changes' };
  }
  return undefined;
}
