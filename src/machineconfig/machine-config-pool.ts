import { parseLifecycleHooks } from './lifecycle-hooks.ts';
import {
  API_VERSION,
  KIND_MACHINE_CONFIG_POOL,
  MASTER_POOL,
  NODE_ROLE_LABEL_PREFIX,
  ROLE_LABEL,
  WORKER_POOL,
} from './constants.ts';
import { parseDisruptionBudget } from './disruption-budget.ts';
import { parseDriftIgnore } from './drift-ignore.ts';
import { MAX_POLICY_ACTIONS, parseDisruptionPolicyEntries, unitName } from './disruption-policy-entries.ts';
import { parseLabelSelector } from './label-selector.ts';
import { parseMaintenanceWindows, WINDOW_SCOPES } from './maintenance-window.ts';
import { checkApiVersion, parseObjectMeta } from './object-meta.ts';
import { nameAnnotationFields, withPoolSpecAnnotation } from './pool-spec-annotation.ts';
import { join, ProblemCollector } from './problem-collector.ts';
import { parsePoolPinnedImageSets } from './pinned-image-set.ts';
import { parseHealthCheck, parseRolloutPolicy } from './rollout-policy.ts';
import type {
  DisruptionAction,
  DisruptionActionType,
  DisruptionPolicy,
  DrainTimeoutAction,
  DriftPolicy,
  MachineConfigPool,
  MachineConfigPoolSpec,
  MaintenanceWindowScope,
  PoolDrainPolicy,
} from './types.ts';

// `configuration` is an MCO field mcplane does not act on; it is accepted so that pools exported
// from a cluster load unmodified.
const SPEC_KEYS = [
  'machineConfigSelector', 'nodeSelector', 'paused', 'maxUnavailable', 'configuration', 'pinnedImageSets',
  'disruptionPolicy', 'driftPolicy', 'driftIgnore', 'drain',
  'maintenanceWindows', 'maintenanceWindowScope', 'downloadWindows', 'disruptionBudget',
  'rollout', 'healthCheck', 'hooks',
];
const PERCENT = /^(\d+)%$/;
const ACTION_TYPES: Record<string, DisruptionActionType> = {
  none: 'none', reload: 'reload', restart: 'restart', 'daemon-reload': 'daemon-reload', daemonreload: 'daemon-reload', drain: 'drain', reboot: 'reboot',
};
const DRIFT_POLICIES: readonly DriftPolicy[] = ['Degrade', 'Reconcile', 'Adopt'];

export function parseMachineConfigPool(doc: Record<string, unknown>, c: ProblemCollector): MachineConfigPool | undefined {
  checkApiVersion(doc, c);
  const metadata = parseObjectMeta(doc.metadata, c);
  const specAsWritten = c.record(doc.spec, 'spec') ?? {};
  c.onlyKeys(specAsWritten, 'spec', SPEC_KEYS);
  const { spec: rawSpec, fromAnnotation } = withPoolSpecAnnotation(doc.metadata, specAsWritten, c);
  const problemsBefore = c.problems.length;

  const spec: MachineConfigPoolSpec = {
    machineConfigSelector: parseLabelSelector(rawSpec.machineConfigSelector, c, 'spec.machineConfigSelector'),
    nodeSelector: parseLabelSelector(rawSpec.nodeSelector, c, 'spec.nodeSelector'),
    paused: c.boolean(rawSpec.paused, 'spec.paused') ?? false,
    maxUnavailable: parseMaxUnavailable(rawSpec.maxUnavailable, c),
    driftPolicy: 'Degrade',
  };
  const drift = c.string(rawSpec.driftPolicy, 'spec.driftPolicy');
  if (drift !== undefined) {
    if (DRIFT_POLICIES.includes(drift as DriftPolicy)) spec.driftPolicy = drift as DriftPolicy;
    else c.add('spec.driftPolicy', 'drift-policy', `driftPolicy "${drift}" is not one of ${DRIFT_POLICIES.join(', ')}`);
  }
  const ignore = parseDriftIgnore(rawSpec.driftIgnore, c, 'spec.driftIgnore');
  if (ignore?.length) spec.driftIgnore = ignore;
  if (rawSpec.disruptionPolicy !== undefined && rawSpec.disruptionPolicy !== null) {
    spec.disruptionPolicy = parseDisruptionPolicyEntries(rawSpec.disruptionPolicy, c, 'spec.disruptionPolicy', parseActions);
  }
  const drain = parseDrainPolicy(rawSpec.drain, c);
  if (drain) spec.drain = drain;
  const windows = parseMaintenanceWindows(rawSpec.maintenanceWindows, c, 'spec.maintenanceWindows');
  if (windows?.length) spec.maintenanceWindows = windows;
  const downloads = parseMaintenanceWindows(rawSpec.downloadWindows, c, 'spec.downloadWindows');
  if (downloads?.length) spec.downloadWindows = downloads;
  const scope = c.string(rawSpec.maintenanceWindowScope, 'spec.maintenanceWindowScope');
  if (scope !== undefined) {
    if (WINDOW_SCOPES.includes(scope as MaintenanceWindowScope)) spec.maintenanceWindowScope = scope as MaintenanceWindowScope;
    else c.add('spec.maintenanceWindowScope', 'window-scope', `maintenanceWindowScope "${scope}" is not one of ${WINDOW_SCOPES.join(', ')} (Disruptive: only drains and reboots wait for a window; All: every update does)`);
  }
  const budget = parseDisruptionBudget(rawSpec.disruptionBudget, c, 'spec.disruptionBudget');
  if (budget) spec.disruptionBudget = budget;
  const rollout = parseRolloutPolicy(rawSpec.rollout, c);
  if (rollout) spec.rollout = rollout;
  const healthCheck = parseHealthCheck(rawSpec.healthCheck, c);
  if (healthCheck) spec.healthCheck = healthCheck;
  const hooks = parseLifecycleHooks(rawSpec.hooks, c, 'spec.hooks');
  if (hooks) spec.hooks = hooks;
  const pinnedImageSets = parsePoolPinnedImageSets(rawSpec.pinnedImageSets, c);
  if (pinnedImageSets?.length) spec.pinnedImageSets = pinnedImageSets;
  nameAnnotationFields(c, problemsBefore, fromAnnotation);

  if (!c.ok || !metadata) return undefined;
  return { apiVersion: API_VERSION, kind: KIND_MACHINE_CONFIG_POOL, metadata, spec };
}

const DRAIN_TIMEOUT_ACTIONS: readonly DrainTimeoutAction[] = ['Wait', 'Degrade'];

/** The pool's drain bounds; the defaults (no timeout, Wait, 600 s) are applied where read. */
function parseDrainPolicy(raw: unknown, c: ProblemCollector): PoolDrainPolicy | undefined {
  const d = c.record(raw, 'spec.drain');
  if (!d) return undefined;
  c.onlyKeys(d, 'spec.drain', ['timeoutSeconds', 'onTimeout', 'stalledAfterSeconds']);
  const out: PoolDrainPolicy = {};
  for (const key of ['timeoutSeconds', 'stalledAfterSeconds'] as const) {
    const n = c.integer(d[key], 'spec.drain', key);
    if (n === undefined) continue;
    if (n < 1) c.add(`spec.drain.${key}`, 'positive', `${key} must be at least 1 (seconds), got ${n}`);
    else out[key] = n;
  }
  const action = c.string(d.onTimeout, 'spec.drain', 'onTimeout');
  if (action !== undefined) {
    if (DRAIN_TIMEOUT_ACTIONS.includes(action as DrainTimeoutAction)) out.onTimeout = action as DrainTimeoutAction;
    else c.add('spec.drain.onTimeout', 'drain-timeout-action', `onTimeout "${action}" is not one of ${DRAIN_TIMEOUT_ACTIONS.join(', ')}`);
  }
  if (out.onTimeout === 'Degrade' && out.timeoutSeconds === undefined) {
    c.add('spec.drain.onTimeout', 'requires-timeout', 'onTimeout Degrade needs timeoutSeconds (how long a drain may take before the node is marked Degraded)');
  }
  return out;
}

function parseMaxUnavailable(raw: unknown, c: ProblemCollector): number | string {
  if (raw === undefined || raw === null) return 1;
  if (typeof raw === 'number') {
    if (Number.isInteger(raw) && raw >= 0) return raw;
  } else if (typeof raw === 'string' && PERCENT.test(raw) && Number(PERCENT.exec(raw)![1]) <= 100) {
    return raw;
  }
  c.add('spec.maxUnavailable', 'max-unavailable', `maxUnavailable must be a whole number or a percentage from 0% to 100%, got ${JSON.stringify(raw)}`);
  return 1;
}

/**
 * A disruption policy as an agent receives it in an assignment: the cluster's entries merged
 * with the pool's, written by the control plane in mcplane's spelling. Read with the pool's
 * rules, except the count of entries (the merge of two lists of 50 may hold up to 100).
 */
export function parseAssignedDisruptionPolicy(raw: unknown, c: ProblemCollector, field: string): DisruptionPolicy | undefined {
  const own = new ProblemCollector(c.object, c.source);
  const policy = parseDisruptionPolicyEntries(raw, own, field, parseActions);
  const problems = own.problems.filter((p) => !(p.rule === 'max-items' && /\.(files|units)$/.test(p.field)));
  for (const p of problems) c.add(p.field, p.rule, p.message);
  return problems.length ? undefined : policy;
}

/** A pool's driftPolicy as an assignment carries it: "" (older control planes) is the default, Degrade. */
export function parseAssignedDriftPolicy(raw: string, c: ProblemCollector, field: string): DriftPolicy | undefined {
  if (raw === '') return 'Degrade';
  if (DRIFT_POLICIES.includes(raw as DriftPolicy)) return raw as DriftPolicy;
  c.add(field, 'drift-policy', `driftPolicy ${JSON.stringify(raw).slice(0, 100)} is not one of ${DRIFT_POLICIES.join(', ')}`);
  return undefined;
}

/** Accepts mcplane's `{type: restart, unit: x}` and MCO's `{type: Restart, restart: {serviceName: x}}`. */
function parseActions(raw: unknown, c: ProblemCollector, field: string): DisruptionAction[] | undefined {
  const list = c.array(raw, field);
  if (!list || list.length === 0) {
    c.add(field, 'required', 'at least one action is required (none, reload, restart, daemon-reload, drain or reboot)');
    return undefined;
  }
  if (list.length > MAX_POLICY_ACTIONS) c.add(field, 'max-items', `at most ${MAX_POLICY_ACTIONS} actions, got ${list.length}`);
  const out: DisruptionAction[] = [];
  list.forEach((rawAction, i) => {
    const f = `${field}[${i}]`;
    const a = c.record(rawAction, f);
    if (!a) return;
    const typeText = c.string(a.type, f, 'type') ?? '';
    const type = ACTION_TYPES[typeText.toLowerCase()];
    if (!type) {
      c.add(join(f, 'type'), 'disruption-action', `action type "${typeText}" is not one of none, reload, restart, daemon-reload, drain, reboot`);
      return;
    }
    if (type !== 'reload' && type !== 'restart') {
      out.push({ type });
      return;
    }
    const nested = c.record(a[type], join(f, type));
    const rawUnit = a.unit ?? nested?.serviceName;
    if (rawUnit === undefined || rawUnit === null) {
      c.add(join(f, 'unit'), 'required', `a ${type} action needs the unit to ${type}`);
      return;
    }
    const unit = unitName(rawUnit, c, join(f, a.unit !== undefined ? 'unit' : `${type}.serviceName`));
    if (unit) out.push({ type, unit });
  });
  return out;
}

/** The two pools every MCO cluster has; mcplane creates them too so configs have somewhere to go. */
export function defaultPools(): MachineConfigPool[] {
  return [MASTER_POOL, WORKER_POOL].map((name) => ({
    apiVersion: API_VERSION,
    kind: KIND_MACHINE_CONFIG_POOL,
    // MCO's built-in pools carry this label, and KubeletConfigs and ContainerRuntimeConfigs
    // select pools by it (machineConfigPoolSelector matches a pool's labels).
    metadata: { name, labels: { [`pools.operator.machineconfiguration.openshift.io/${name}`]: '' } },
    spec: {
      machineConfigSelector: { matchLabels: { [ROLE_LABEL]: name } },
      nodeSelector: { matchLabels: { [`${NODE_ROLE_LABEL_PREFIX}${name}`]: '' } },
      paused: false,
      maxUnavailable: 1,
      driftPolicy: 'Degrade',
    },
  }));
}
