// The dry-run preview: what an Apply would do to every pool and node before anything is stored.
// It renders each affected pool from the cache with the applied documents laid over it, and plans
// every node's update with the functions the agent runs (diffSpecs, planDisruption) and the
// rollout with the rules the rollout controller runs (previewRollout replays decideRollout), so
// what it shows is what then happens.

import {
  configsForPool,
  describeLifecycleHooks,
  describeTryCheck,
  hookChangedPaths,
  mergeLifecycleHooks,
  parseHooksAnnotation,
  ProblemCollector,
  diffSpecs,
  effectiveTry,
  formatWait,
  mergeDisruptionPolicies,
  policyEntryOrigin,
  poolMembership,
  needsStaging,
  previewRollout,
  previewStaging,
  RenderError,
  renderPool,
  typicalUpdate,
  updateActionOf,
  formatProblem,
  type ConfigDiff,
  type DisruptionAction,
  type DisruptionPlan,
  type MachineConfig,
  type MachineConfigPool,
  type MachineConfiguration,
  type TryPolicy,
  type UpdateAction,
  type UpdateRecord,
} from '../../machineconfig/index.ts';
import type { ClusterCache } from './cluster-cache.ts';
import { planNodeUpdateTo } from './node-update-plan.ts';

export interface PathChangePreview { name: string; change: string }

export interface RenderedDiffPreview {
  files: PathChangePreview[];
  units: PathChangePreview[];
  sshKeys: boolean;
  passwordHash: boolean;
  kernelArgumentsAdded: string[];
  kernelArgumentsRemoved: string[];
  kernelTypeChanged: boolean;
  kernelType: string;
  extensionsAdded: string[];
  extensionsRemoved: string[];
  osImageUrlChanged: boolean;
  osImageUrl: string;
  fips: boolean;
}

export interface PoolPreview {
  pool: string;
  current: string;
  rendered: string;
  diff: RenderedDiffPreview | null;
  renderProblems: string[];
  batchSeconds: number;
  batchBasis: string;
}

export interface NodePreview {
  node: string;
  pool: string;
  from: string;
  action: UpdateAction;
  actions: string;
  rules: { change: string; actions: string; rule: string }[];
  why: string;
  batch: number;
  order: number;
  window: string;
  startsAtUnixMs: number;
  note: string;
  /** When it downloads the config ahead of the disruption (staging): "-" when it downloads nothing. */
  staging: string;
  stagesAtUnixMs: number;
  /** Lifecycle hooks the node runs for this update ("beforeRebooting: /usr/bin/flush"), "" for none. */
  hooks: string;
  /** Try mode: the timeout and the checks the node tries the config with, "" when it does not try. */
  try: string;
}

export interface ApplyPreview {
  poolPreviews: PoolPreview[];
  nodePreviews: NodePreview[];
}

export interface AppliedDocuments {
  configs: readonly MachineConfig[];
  pools: readonly MachineConfigPool[];
  machineConfigurations: readonly MachineConfiguration[];
}

/**
 * `applied` holds the documents that change what is stored (those Apply reports created or
 * configured: one identical to the stored object previews nothing), the generated configs among
 * them. `history` is each node's stored update history (NodeHistory): what recent updates took is
 * what the preview takes each batch to last, so batches spill into later windows as they would.
 * `tryTimeout`: `mcctl apply --try`, which every node the Apply gives a new config tries.
 */
export function previewApply(cache: ClusterCache, applied: AppliedDocuments, now: number, history: ReadonlyMap<string, readonly UpdateRecord[]> = new Map(), tryTimeout?: string): ApplyPreview {
  const configs = new Map([...cache.configs].map(([name, o]) => [name, o.value]));
  for (const mc of applied.configs) configs.set(mc.metadata.name, mc);
  const pools = new Map([...cache.pools].map(([name, o]) => [name, o.value]));
  for (const p of applied.pools) pools.set(p.metadata.name, p);
  const cluster = (applied.machineConfigurations[0] ?? cache.machineConfiguration?.value)?.spec.nodeDisruptionPolicy;
  const allConfigs = [...configs.values()];

  // Each node's pool under the applied pools: a changed nodeSelector moves nodes between pools.
  const membership = new Map<string, { pool: string; poolError?: string }>();
  const poolList = [...pools.values()];
  for (const n of cache.nodes.values()) membership.set(n.name, applied.pools.length ? poolMembership(n.name, n.poolLabels, poolList) : { pool: n.pool });
  const moved = [...cache.nodes.values()].filter((n) => membership.get(n.name)!.pool !== n.pool);

  // A pool is affected when its spec, a config it selects (before or after), or the cluster
  // policy is in the request, or when nodes move into or out of it.
  const touchedConfigs = [...applied.configs, ...applied.configs.map((mc) => cache.configs.get(mc.metadata.name)?.value).filter((x): x is MachineConfig => !!x)];
  const affected = [...pools.keys()].filter((name) =>
    applied.machineConfigurations.length > 0 ||
    applied.pools.some((p) => p.metadata.name === name) ||
    moved.some((n) => n.pool === name || membership.get(n.name)!.pool === name) ||
    configsForPool(pools.get(name)!, touchedConfigs).length > 0).sort();

  const poolPreviews: PoolPreview[] = [];
  const nodePreviews: NodePreview[] = [];
  for (const name of affected) {
    const pool = pools.get(name)!;
    const current = cache.poolTarget(name) ?? '';
    const currentSpec = current ? cache.renderedConfig(current)?.spec : undefined;
    let rendered;
    try {
      rendered = renderPool(pool, allConfigs);
    } catch (err) {
      if (!(err instanceof RenderError)) throw err;
      poolPreviews.push({ pool: name, current, rendered: '', diff: null, renderProblems: err.problems.map(formatProblem), batchSeconds: 0, batchBasis: '' });
      continue;
    }
    const poolPreview: PoolPreview = { pool: name, current, rendered: rendered.name, diff: wireDiff(diffSpecs(currentSpec, rendered.spec), rendered.spec), renderProblems: [], batchSeconds: 0, batchBasis: '' };
    poolPreviews.push(poolPreview);

    // The try a node handed this config runs (agentPolicyFor): this Apply's --try when the config
    // is new, else one an earlier `apply --try` recorded for it.
    const appliedTry = (rendered.name !== current ? tryTimeout : undefined) ?? cache.configTries.get(rendered.name)?.value.timeout;
    const poolPolicy = pool.spec.disruptionPolicy;
    const policy = mergeDisruptionPolicies(cluster, poolPolicy);
    const nodes = [...cache.nodes.values()].filter((n) => membership.get(n.name)!.pool === name);
    const plans = new Map<string, DisruptionPlan | undefined>();
    // The agent's own planning, as the rollout gates use it (node-update-plan.ts). A node whose
    // current config was collected cannot be planned: the agent would say so too.
    for (const n of nodes) plans.set(n.name, planNodeUpdateTo(cache, n, rendered, policy)?.plan);
    const actionOf = (n: { name: string }): UpdateAction | undefined => {
      const plan = plans.get(n.name);
      return plan && updateActionOf(plan);
    };
    // A batch lasts what this pool's recent updates of the same kind took (a reboot or not).
    const reboots = nodes.some((n) => { const a = actionOf(n); return a === undefined || a === 'reboot' || a === 'drain'; });
    const typical = typicalUpdate(nodes.flatMap((n) => history.get(n.name) ?? []), reboots);
    poolPreview.batchSeconds = (typical?.ms ?? 0) / 1000;
    poolPreview.batchBasis = typical
      ? `median of ${typical.samples} recent update${typical.samples === 1 ? '' : 's'}${typical.rebooting === 'any' ? '' : typical.rebooting ? ' that rebooted' : ' without a reboot'} in this pool`
      : 'no update history in this pool yet: batches taken to be instant';
    // Nodes already on the would-be target (a no-op apply) have nothing to schedule.
    const schedule = new Map(previewRollout(pool, rendered.name, nodes, { now, actionOf }, typical?.ms ?? 0).map((s) => [s.node, s]));
    // Staging: who downloads the config ahead of the disruption, and when (in rollout order).
    const stagingOf = previewStaging(pool, [...schedule.values()].filter((s) => s.order > 0).sort((a, b) => a.order - b.order).map((s) => s.node), (node) => {
      const n = cache.nodes.get(node);
      const fromName = n?.status.currentConfig ?? '';
      const from = fromName ? cache.renderedConfig(fromName)?.spec : undefined;
      // A node with no config yet takes its first at once: nothing to stage ahead; an agent from
      // before staging downloads during its update.
      return !!fromName && !!n?.status.agentFeatures?.includes('staging') && needsStaging(from, rendered.spec);
    }, now);
    // Lifecycle hooks: the pool's, then its configs' (the mcplane.io/hooks annotation) in name order,
    // as the node would get them; each node lists those whose `if` its own update matches.
    const hooks = mergeLifecycleHooks(pool.spec.hooks, rendered.sources.map((source) => {
      const mc = allConfigs.find((x) => x.metadata.name === source);
      return { name: source, hooks: mc ? parseHooksAnnotation(mc.metadata.annotations, new ProblemCollector(`MachineConfig/${source}`)) : undefined };
    }));
    const hooksText = (fromName: string): string => {
      const from = fromName ? cache.renderedConfig(fromName)?.spec : undefined;
      return describeLifecycleHooks(hooks, fromName && !from ? undefined : hookChangedPaths(diffSpecs(from, rendered.spec)));
    };
    for (const n of nodes) {
      const plan = plans.get(n.name);
      const s = schedule.get(n.name)!;
      const onTarget = n.status.currentConfig === rendered.name && n.desiredConfig === rendered.name;
      const rules = plan?.decisions.map((d) => ({
        change: d.change,
        actions: actionsText(d.actions),
        rule: d.entry && !d.entry.builtin ? `${policyEntryOrigin(cluster, poolPolicy, name, d.entry)} (${d.entry.kind === 'sshkey' ? 'sshkey' : d.entry.key})` : d.rule,
      })) ?? [];
      const action = plan ? updateActionOf(plan) : 'reboot';
      const st = stagingOf.get(n.name);
      // A node cannot be disrupted before it has staged: not before its download can start.
      const startsAt = st?.at !== undefined ? Math.max(s.startsAt, st.at) : s.startsAt;
      const movedFrom = n.pool !== name ? `moves from ${n.pool ? `pool ${n.pool}` : 'no pool'} (its labels match this pool's nodeSelector now); ` : '';
      nodePreviews.push({
        node: n.name,
        pool: name,
        from: n.status.currentConfig,
        action: onTarget ? 'none' : action,
        actions: onTarget ? 'none' : plan ? (plan.reboot ? 'reboot' : actionsText(plan.actions)) : 'reboot',
        rules: onTarget ? [] : rules,
        why: onTarget ? 'already on it' : movedFrom + (plan ? whyOf(plan, rules) : `its current config ${n.status.currentConfig} is gone, so it cannot be planned (assumed to reboot)`),
        batch: onTarget ? 0 : s.batch,
        order: s.order,
        window: onTarget ? '-' : windowText(s.window, now),
        startsAtUnixMs: startsAt,
        note: onTarget ? 'already on the config' : s.note,
        staging: onTarget || !st?.needed ? '-' : st.at !== undefined ? (st.at <= now ? 'now' : `${iso(st.at)} (in ${formatWait(st.at - now)})`) : `after ${st.after} node${st.after === 1 ? '' : 's'} ahead staged`,
        stagesAtUnixMs: onTarget || !st?.needed ? 0 : st.at ?? 0,
        try: onTarget ? '' : tryText(effectiveTry(pool.spec, appliedTry)),
        hooks: onTarget ? '' : hooksText(n.status.currentConfig),
      });
    }
  }
  // Nodes no pool selects any more keep what they run and get no update: said, not hidden.
  for (const n of moved) {
    const m = membership.get(n.name)!;
    if (m.pool) continue;
    nodePreviews.push({
      node: n.name, pool: '', from: n.status.currentConfig, action: 'none', actions: 'none', rules: [],
      why: `leaves pool ${n.pool}: ${m.poolError ?? 'no pool selects it'}`,
      batch: 0, order: 0, window: '-', startsAtUnixMs: 0, staging: '-', stagesAtUnixMs: 0,
      note: 'keeps its current config and gets no updates until a pool selects it',
      try: '',
      hooks: '',
    });
  }
  return { poolPreviews, nodePreviews };
}

/** The rules behind the node's action: those that reboot for a reboot, else those that act. */
function whyOf(plan: DisruptionPlan, rules: { change: string; actions: string; rule: string }[]): string {
  if (rules.length === 0) return 'no change';
  const deciding = plan.reboot ? rules.filter((r) => r.actions === 'reboot') : rules.filter((r) => r.actions !== 'none');
  const shown = deciding.length ? deciding : rules;
  return shown.map((r) => `${r.change}: ${r.rule}`).join('; ');
}

function actionsText(actions: readonly DisruptionAction[]): string {
  const acting = actions.filter((a) => a.type !== 'none');
  return acting.length ? acting.map((a) => (a.unit ? `${a.type} ${a.unit}` : a.type)).join(', ') : 'none';
}

function windowText(window: { open: boolean; start?: number; closesAt?: number } | undefined, now: number): string {
  if (!window) return '-';
  if (window.open) return `open until ${iso(window.closesAt ?? now)}`;
  if (window.start === undefined) return 'no window ahead';
  return `${iso(window.start)} (in ${formatWait(window.start - now)})`;
}

function iso(ms: number): string {
  return new Date(ms).toISOString().slice(0, 16) + 'Z';
}

function wireDiff(d: ConfigDiff, to: { kernelType: string; osImageURL: string }): RenderedDiffPreview {
  return {
    files: d.files.map((f) => ({ name: f.path, change: f.change })),
    units: d.units.map((u) => ({ name: u.name, change: u.change })),
    sshKeys: d.sshKeys,
    passwordHash: d.passwordHash,
    kernelArgumentsAdded: d.kernelArguments.add,
    kernelArgumentsRemoved: d.kernelArguments.remove,
    kernelTypeChanged: d.kernelType,
    kernelType: d.kernelType ? to.kernelType : '',
    extensionsAdded: d.extensions.add,
    extensionsRemoved: d.extensions.remove,
    osImageUrlChanged: d.osImageURL,
    osImageUrl: d.osImageURL ? to.osImageURL : '',
    fips: d.fips,
  };
}

/** A try as the preview says it: "5m: tcp 10.0.0.1:6443, unit crio.service", or "" for none. */
function tryText(policy: TryPolicy | undefined): string {
  if (!policy) return '';
  return `${policy.timeout}: ${policy.checks.length ? policy.checks.map(describeTryCheck).join(', ') : 'no checks, confirmed by hand (mcctl confirm)'}`;
}
