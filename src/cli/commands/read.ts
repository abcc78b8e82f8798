// mcctl get (kubectl's conventions: TYPE/NAME, several names, -l, -o wide|name|yaml|json|jsonpath,
// --no-headers, -w) and mcctl describe.

// From machineconfig's modules, not its index: a bundle loads all that a command's module imports
// before it runs, and the index brings every parser (yaml, croner, TOML) that `get` never uses.
import { API_KINDS } from '../../machineconfig/api-kinds.ts';
import { ConfigurationError } from '../../machineconfig/errors.ts';
import { formatSelector, matchesSelector } from '../../machineconfig/label-selector.ts';
import { durationMs } from '../../machineconfig/duration.ts';
import type { DisruptionAction, LabelSelector, MachineConfiguration } from '../../machineconfig/index.ts';
import type { MachineConfigPool__Output } from '../../runtime/generated/mcplane/v1/MachineConfigPool.ts';
import type { Node__Output } from '../../runtime/generated/mcplane/v1/Node.ts';
import type { WatchEvent__Output } from '../../runtime/generated/mcplane/v1/WatchEvent.ts';
import { call } from '../client/call.ts';
import type { Clients } from '../client/connection.ts';
import { watchWithReconnect } from '../client/watch-stream.ts';
import { age, columnWidths, forDisplay, formatRow, shown, table } from '../format.ts';
import { parseSelectorFlag } from '../label-selector-flag.ts';
import { formatTimeline } from '../update-timeline.ts';
import { customCell, formatOne, sortKey, type CustomColumn, type GetFormat } from '../output.ts';
import { nodeState, reasonText, RESOURCES, resourceOf, type Resource, type ResourceName } from '../resources.ts';

export { resourceOf } from '../resources.ts';

export interface Io {
  out(text: string): void;
  err(text: string): void;
  /** stdout is a terminal: displays may redraw in place. */
  isTTY?: boolean;
}

export interface GetOptions {
  format: GetFormat;
  selector?: string;
  headers: boolean;
  watch: boolean;
  pool?: string;
  /** Events about this node only (get events). */
  node?: string;
  /** Audit records of the last DURATION only (get audit). */
  since?: string;
  /** --sort-by: a JSONPath into each object (kubectl's), e.g. .metadata.creationTimestamp. */
  sortBy?: string;
  /** --show-labels: a LABELS column. */
  showLabels?: boolean;
}

interface Target {
  resource: ResourceName;
  /** Empty: list them all. */
  names: string[];
}

/** `nodes n1 n2`, `pool/worker node/n1`, `pools,nodes`: kubectl's ways to name what to get. */
export function parseTargets(args: string[]): Target[] {
  if (args.length === 0) throw new ConfigurationError('get needs a resource: pools (mcp), nodes, mc, rendered, mcn or replicas, or TYPE/NAME');
  if (args[0]!.includes('/')) {
    const targets: Target[] = [];
    for (const arg of args) {
      const slash = arg.indexOf('/');
      if (slash <= 0 || slash === arg.length - 1) {
        throw new ConfigurationError(`"${arg}": when the first argument is TYPE/NAME, every argument must be TYPE/NAME`);
      }
      const resource = resourceOf(arg.slice(0, slash));
      const name = arg.slice(slash + 1);
      const existing = targets.find((t) => t.resource === resource);
      if (existing) existing.names.push(name);
      else targets.push({ resource, names: [name] });
    }
    return targets;
  }
  const [first, ...names] = args;
  const slashed = names.find((n) => n.includes('/'));
  if (slashed) throw new ConfigurationError(`"${slashed}": give either a resource type and names (get nodes n1 n2) or TYPE/NAME arguments (get node/n1), not both`);
  const resources = [...new Set(first!.split(',').filter(Boolean).map(resourceOf))];
  if (resources.length > 1 && names.length) throw new ConfigurationError(`names cannot follow several resource types ("${first}"): use TYPE/NAME for each`);
  return resources.map((resource) => ({ resource, names }));
}

interface Fetched {
  resource: Resource<unknown>;
  items: unknown[];
  /** Whether the user named objects (rather than listing). */
  named: boolean;
}

export async function getCommand(c: Clients, io: Io, args: string[], options: GetOptions): Promise<void> {
  const targets = parseTargets(args);
  const selector = options.selector !== undefined ? parseSelectorFlag(options.selector) : undefined;
  if (selector && targets.some((t) => t.names.length)) throw new ConfigurationError('--selector cannot be combined with names: give one or the other');
  if (options.pool !== undefined && targets.some((t) => t.resource !== 'nodes' && t.resource !== 'rendered' && t.resource !== 'events' && t.resource !== API_KINDS.MachineConfigNode.mcctlName && t.resource !== 'drift')) {
    throw new ConfigurationError('--pool filters nodes, rendered configs, machineconfignodes, events and drift only');
  }
  if (options.node !== undefined && targets.some((t) => t.resource !== 'events')) {
    throw new ConfigurationError('--node filters events only (mcctl get events --node NAME)');
  }
  let sinceMs: number | undefined;
  if (options.since !== undefined) {
    if (targets.some((t) => t.resource !== 'audit')) throw new ConfigurationError('--since filters the audit trail only (mcctl get audit --since 1h)');
    const ms = durationMs(options.since);
    if (ms === undefined) throw new ConfigurationError(`--since ${options.since}: expected a duration such as 30m, 1h, 7d`);
    sinceMs = Date.now() - ms;
  }
  if (options.watch) return watchGet(c, io, targets, selector, options);

  const fetched: Fetched[] = [];
  const missing: string[] = [];
  for (const t of targets) {
    const resource = RESOURCES[t.resource];
    if (t.names.length === 0) {
      const items = (await resource.list(c, { pool: options.pool, node: options.node, ...(sinceMs !== undefined ? { sinceMs } : {}) })).filter((item) => selects(resource, selector, item));
      fetched.push({ resource, items, named: false });
      continue;
    }
    const items: unknown[] = [];
    for (const name of t.names) {
      try {
        items.push(await resource.get(c, name));
      } catch (err) {
        // kubectl prints what it found and names what it did not; a failure of another kind stops.
        if ((err as { grpcCode?: number }).grpcCode === 5 || (err as { code?: string }).code === 'MCPLANE_NOT_FOUND') missing.push((err as Error).message);
        else throw err;
      }
    }
    fetched.push({ resource, items, named: true });
  }
  if (options.sortBy !== undefined) for (const f of fetched) f.items = sortItems(f.resource, f.items, options.sortBy);

  io.out(print(fetched, options, targets.length > 1));
  if (fetched.every((f) => f.items.length === 0) && missing.length === 0 && ['table', 'wide', 'name', 'custom-columns'].includes(options.format.kind)) {
    io.err('No resources found\n');
  }
  if (missing.length) throw new ConfigurationError(missing.join('\n'));
}

function selects(resource: Resource<unknown>, selector: LabelSelector | undefined, item: unknown): boolean {
  if (!selector) return true;
  const labels = resource.labels(item);
  if (labels === undefined) {
    throw new ConfigurationError(`--selector: the server does not send labels of ${resource.name}; label selectors work on nodes and MachineConfigs (mc)`);
  }
  return matchesSelector(selector, labels);
}

/** kubectl's --sort-by: by a JSONPath into each object, numbers as numbers; a stable sort. */
function sortItems(resource: Resource<unknown>, items: unknown[], expr: string): unknown[] {
  const keyed = items.map((item) => ({ item, key: sortKey(expr, resource.object(item)) }));
  keyed.sort((a, b) => {
    if (typeof a.key === 'number' && typeof b.key === 'number') return a.key - b.key;
    const x = String(a.key);
    const y = String(b.key);
    return x < y ? -1 : x > y ? 1 : 0;
  });
  return keyed.map((k) => k.item);
}

/** The table's shape: the resource's columns (-o wide adds some), custom columns, LABELS. */
interface Layout {
  wide: boolean;
  custom?: CustomColumn[];
  showLabels: boolean;
}

function layoutOf(options: GetOptions): Layout {
  const f = options.format;
  return { wide: f.kind === 'wide', custom: f.kind === 'custom-columns' ? f.columns : undefined, showLabels: options.showLabels ?? false };
}

function columnsOf(resource: Resource<unknown>, layout: Layout): string[] {
  const columns = layout.custom ? layout.custom.map((c) => c.header) : layout.wide ? [...resource.columns, ...resource.wideColumns] : resource.columns;
  return layout.showLabels ? [...columns, 'LABELS'] : columns;
}

function rowOf(resource: Resource<unknown>, item: unknown, layout: Layout, prefixType: boolean): (string | number)[] {
  const row = layout.custom ? layout.custom.map((c) => customCell(c, resource.object(item))) : resource.row(item, layout.wide);
  if (prefixType && !layout.custom) row[0] = `${resource.typeName}/${row[0]}`;
  if (layout.showLabels) {
    const labels = resource.labels(item) ?? {};
    row.push(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `${k}=${v}`).join(',') || '<none>');
  }
  return row;
}

function print(fetched: Fetched[], options: GetOptions, severalTypes: boolean): string {
  const f = options.format;
  if (f.kind === 'name') return fetched.flatMap((g) => g.items.map((i) => `${g.resource.typeName}/${g.resource.nameOf(i)}\n`)).join('');
  if (f.kind === 'table' || f.kind === 'wide' || f.kind === 'custom-columns') {
    const layout = layoutOf(options);
    return fetched.filter((g) => g.items.length)
      .map((g) => table(columnsOf(g.resource, layout), g.items.map((i) => rowOf(g.resource, i, layout, severalTypes)), { headers: options.headers }))
      .join('\n');
  }
  const objects = fetched.flatMap((g) => g.items.map((i) => g.resource.object(i)));
  // One object asked for by name prints as itself; anything else as a List, as kubectl does.
  const single = fetched.length === 1 && fetched[0]!.named && objects.length === 1 && fetched[0]!.items.length === 1 && !severalTypes;
  return formatOne(single ? objects[0] : { apiVersion: 'v1', kind: 'List', items: objects, metadata: { resourceVersion: '' } }, f);
}

/**
 * get -w: the table (or objects) once, then one row per change in the order the server sent
 * them. A row is printed only when it differs from the last one printed for that object (the
 * server also reports changes no column shows, and a reconnect re-sends everything).
 */
function watchGet(c: Clients, io: Io, targets: Target[], selector: LabelSelector | undefined, options: GetOptions): Promise<void> {
  if (targets.length !== 1) throw new ConfigurationError('--watch follows one resource type at a time');
  const t = targets[0]!;
  const resource = RESOURCES[t.resource];
  if (!resource.watch) throw new ConfigurationError(`--watch works on pools, nodes and events; ${t.resource} has no watch`);
  const f = options.format;
  const layout = layoutOf(options);
  const lineFormat = f.kind === 'table' || f.kind === 'wide' || f.kind === 'custom-columns';
  const ageColumn = layout.custom ? -1 : resource.columns.indexOf('AGE');
  const wanted = (item: unknown): boolean => {
    if (t.names.length && !t.names.includes(resource.nameOf(item))) return false;
    if (options.pool !== undefined && (item as Node__Output).pool !== options.pool && (item as { object?: string }).object !== `pool/${options.pool}`) return false;
    if (options.node !== undefined && (item as { object?: string }).object !== `node/${options.node}`) return false;
    return selects(resource, selector, item);
  };
  const itemOf = (e: WatchEvent__Output): unknown => (resource.watch === 'pool' ? e.pool : resource.watch === 'event' ? e.event : e.node);
  /** What is printed for an object, and the part of it that counts as a change (not its AGE). */
  const render = (item: unknown): { text: string; key: string } => {
    if (f.kind === 'name') return { text: `${resource.typeName}/${resource.nameOf(item)}\n`, key: JSON.stringify(resource.object(item)) };
    if (!lineFormat) {
      const text = f.kind === 'yaml' ? `---\n${formatOne(resource.object(item), f)}` : formatOne(resource.object(item), f);
      return { text: f.kind === 'jsonpath' && !text.endsWith('\n') ? text + '\n' : text, key: text };
    }
    const row = rowOf(resource, item, layout, false);
    return { text: formatRow(row, widths) + '\n', key: JSON.stringify(row.filter((_, i) => i !== ageColumn)) };
  };
  let widths: number[] = [];
  let printedTable = false;
  const last = new Map<string, string>();
  const show = (name: string, item: unknown): void => {
    const { text, key } = render(item);
    if (last.get(name) === key) return;
    last.set(name, key);
    io.out(text);
  };
  const deleted = (name: string): void => {
    if (!last.has(name)) return;
    last.delete(name);
    if (lineFormat) io.out(formatRow([name, '<deleted>'], widths) + '\n');
    else io.out(`${f.kind === 'yaml' ? '---\n' : ''}# deleted: ${resource.typeName}/${name}\n`);
  };

  const handle = watchWithReconnect(c, {
    pools: resource.watch === 'pool',
    nodes: resource.watch === 'node',
    events: resource.watch === 'event',
    notice: io.err,
    onSnapshot(events) {
      const items = events.map(itemOf).filter((i): i is NonNullable<typeof i> => !!i && wanted(i));
      if (!printedTable) {
        printedTable = true;
        if (lineFormat) {
          const columns = columnsOf(resource, layout);
          const rows = items.map((i) => rowOf(resource, i, layout, false));
          // Room for what the rows may show later, so that change rows stay in their columns.
          const widest = layout.custom ? [] : items.flatMap((i) => (resource.widest ? [resource.widest(i)] : []));
          widths = columnWidths(columns, [...rows, ...widest]);
          if (options.headers && rows.length) io.out(formatRow(columns, widths) + '\n');
        }
        if (!items.length) io.err('No resources found\n');
      }
      const present = new Set(items.map((i) => resource.nameOf(i)));
      // After a reconnect: objects deleted while the stream was down.
      for (const name of [...last.keys()]) if (!present.has(name)) deleted(name);
      for (const item of items) show(resource.nameOf(item), item);
    },
    onChange(e) {
      const item = itemOf(e);
      if (!item) return;
      const name = resource.nameOf(item);
      if (e.type === 'DELETED') return deleted(name);
      if (wanted(item)) show(name, item);
      else if (last.has(name)) deleted(name);
    },
  });
  process.once('SIGINT', () => handle.stop());
  return handle.done;
}

/**
 * MachineConfiguration/cluster's node disruption policy as in force: MCO's built-in policies with
 * the object's entries over them (MCO's status.nodeDisruptionPolicyStatus.clusterPolicies).
 */
async function describeMachineConfiguration(c: Clients, name: string): Promise<string> {
  const res = await call(c, c.config.getMachineConfiguration.bind(c.config), { name }, `describe machineconfiguration ${name}`);
  const user = res.manifestJson ? (JSON.parse(res.manifestJson) as MachineConfiguration).spec.nodeDisruptionPolicy : undefined;
  const { withBuiltinPolicy } = await import('../../machineconfig/builtin-disruption-policy.ts');
  const { REGISTRIES_CONF_PATH } = await import('../../machineconfig/registries-config.ts');
  const policy = withBuiltinPolicy(user);
  const actions = (list: DisruptionAction[], special = false): string =>
    special ? 'reload crio.service; drain unless every change is safe (MCO\'s Special)' : list.filter((a) => a.type !== 'none').map((a) => (a.unit ? `${a.type} ${a.unit}` : a.type)).join(', ') || 'none';
  const origin = (builtin: boolean): string => (builtin ? 'built-in' : 'MachineConfiguration/cluster');
  const rows = (entries: [string, string, string][]): string => {
    const w0 = Math.max(...entries.map((e) => e[0].length));
    const w1 = Math.max(...entries.map((e) => e[1].length));
    return entries.map(([a, b, o]) => `    ${a.padEnd(w0)}  ${b.padEnd(w1)}  ${o}\n`).join('');
  };
  let out = `Name:             ${name}\n`;
  out += `Stored:           ${res.manifestJson ? `yes (resourceVersion ${res.resourceVersion})` : 'no: MCO\'s built-in policies are the whole policy'}\n`;
  out += 'Node Disruption Policy (in force: MCO\'s built-ins, an entry of this object for the same path or unit replaces one):\n';
  out += '  Files (longest matching path wins; any other file change reboots):\n';
  out += rows(policy.files!.map((f) => [f.path, actions(f.actions, policy.builtin.files.has(f.path) && f.path === REGISTRIES_CONF_PATH), origin(policy.builtin.files.has(f.path))]));
  out += '  Units (any other unit change reboots):\n';
  out += policy.units!.length ? rows(policy.units!.map((u) => [u.name, actions(u.actions), origin(policy.builtin.units.has(u.name))])) : '    <none>\n';
  out += `  SSH key:        ${actions(policy.sshkey!.actions)} (${origin(policy.builtin.sshkey)})\n`;
  return out;
}

export async function describeCommand(c: Clients, resource: string, name: string): Promise<string> {
  if (/^machineconfigurations?$/i.test(resource)) return describeMachineConfiguration(c, name);
  const r = resourceOf(resource);
  if (r === 'pools') {
    const pool = await call(c, c.status.getPool.bind(c.status), { name }, `describe pool ${name}`);
    const nodes = (await RESOURCES.nodes.list(c, { pool: name })) as Node__Output[];
    poolStatus ??= await import('../../machineconfig/pool-status.ts');
    return describePool(pool, nodes);
  }
  if (r === 'nodes') {
    const node = await call(c, c.status.getNode.bind(c.status), { name }, `describe node ${name}`);
    // A server older than this mcctl has no history to give: the rest is still worth showing.
    const history = await call(c, c.status.getNodeHistory.bind(c.status), { name }, `get the update history of node ${name}`).catch((err: unknown) => {
      if ((err as { grpcCode?: number }).grpcCode === 12) return undefined;
      throw err;
    });
    return describeNode(node) + (history ? formatTimeline(history.updates, node.status?.currentUpdate) : 'Updates:         <this server keeps no update history (it is older than mcctl)>\n');
  }
  throw new ConfigurationError(`describe works on pools, nodes and machineconfiguration cluster; for ${resource} use: mcctl get ${resource} ${name} -o yaml`);
}

/** For formatDuration; describe pool loads it (the pool parser and croner come with it), get does not. */
let poolStatus: typeof import('../../machineconfig/pool-status.ts') | undefined;

/** The pool's spec.drain with its defaults spelled out (they apply only with Kubernetes access). */
function describeDrainPolicy(d: { timeoutSeconds?: number; onTimeout?: string; stalledAfterSeconds?: number }): string {
  const { formatDuration } = poolStatus!;
  const timeout = d.timeoutSeconds ? `after ${formatDuration(d.timeoutSeconds * 1000)} ${d.onTimeout === 'Degrade' ? 'the node is marked Degraded' : 'keep waiting'}` : 'no timeout (keep waiting)';
  return `${timeout}; NodeDrainStalled after ${formatDuration((d.stalledAfterSeconds ?? 600) * 1000)}`;
}

function describePool(pool: MachineConfigPool__Output, poolNodes: Node__Output[]): string {
  // Every string shown with its control characters escaped (format.ts says why).
  const spec = forDisplay(JSON.parse(pool.specJson || '{}'));
  const [p, nodes] = forDisplay([pool, poolNodes] as const);
  const s = p.status;
  const lines = [
    `Name:                    ${p.name}`,
    `Paused:                  ${p.paused}`,
    `Max Unavailable:         ${p.maxUnavailable}`,
    `Machine Config Selector: ${formatSelector(spec.machineConfigSelector ?? null)}`,
    `Node Selector:           ${formatSelector(spec.nodeSelector ?? null)}`,
    `Drift Policy:            ${spec.driftPolicy ?? 'Degrade'}`,
    ...(spec.driftIgnore?.length ? [`Drift Ignore:            ${(spec.driftIgnore as string[]).join(', ')}`] : []),
    `Disruption Policy:       ${spec.disruptionPolicy ? JSON.stringify(spec.disruptionPolicy) : '<MCO defaults: reboot for files and units, none for SSH keys>'}`,
    `Drain:                   ${describeDrainPolicy(spec.drain ?? {})}`,
    ...(spec.maintenanceWindows?.length ? [
      `Maintenance Windows:     ${(spec.maintenanceWindows as { schedule: string; duration: string; timeZone: string }[]).map((w) => `"${w.schedule}" for ${w.duration} (${w.timeZone})`).join(', ')}; ${spec.maintenanceWindowScope === 'All' ? 'every update waits' : 'drains and reboots wait'}: ${s?.maintenanceWindow || 'unknown'}`,
    ] : []),
    ...(spec.disruptionBudget ? [`Disruption Budget:       at most ${spec.disruptionBudget.maxUnavailable} unavailable per ${spec.disruptionBudget.groupBy.join(',')} group (nodes without the label: group "")`] : []),
    // mcplane's rollout safety (spec.rollout, spec.healthCheck), shown only where set.
    ...(spec.rollout ? [`Rollout:                 ${JSON.stringify(spec.rollout)}`] : []),
    ...(spec.healthCheck ? [`Health Check:            ${JSON.stringify(spec.healthCheck)}`] : []),
    ...(spec.pinnedImageSets?.length ? [`Pinned Image Sets:       ${(spec.pinnedImageSets as { name: string }[]).map((r) => r.name).join(', ')}`] : []),
    `Configuration:           ${s?.configuration || '<none>'}`,
    `  Sources:               ${s?.configurationSources.join(', ') || '<none>'}`,
    `Machines:                ${s?.machineCount ?? 0} total, ${s?.updatedMachineCount ?? 0} updated, ${s?.readyMachineCount ?? 0} ready, ${s?.unavailableMachineCount ?? 0} unavailable, ${s?.degradedMachineCount ?? 0} degraded`,
    'Conditions:',
    indent(table(['TYPE', 'STATUS', 'REASON', 'AGE', 'MESSAGE'], (s?.conditions ?? []).map((c) => [c.type, c.status, c.reason, age(c.lastTransitionTimeUnixMs), c.message]))),
    'Nodes:',
    nodes.length
      ? indent(table(['NAME', 'STATE', 'PHASE', 'CURRENTCONFIG', 'CONNECTED', 'REASON'], poolNodes.map((n) => [n.name, nodeState(n), n.status?.phase || '<none>', n.status?.currentConfig || '<none>', n.status?.connected ? 'True' : 'False', reasonText(n.status?.reason)])))
      : '  <none>\n',
  ];
  return lines.join('\n').replace(/\n+$/, '') + '\n';
}

function describeNode(node: Node__Output): string {
  // Every string the node reported shown with its control characters escaped (format.ts says why).
  const n = forDisplay(node);
  const s = n.status;
  const os = s?.os;
  const lines = [
    `Name:            ${n.name}`,
    `Pool:            ${n.pool || '<none>'}`,
    `Labels:          ${Object.entries(n.labels).map(([k, v]) => (v ? `${k}=${v}` : k)).join('\n                 ') || '<none>'}`,
    `Registered:      ${n.registrationTimeUnixMs ? new Date(n.registrationTimeUnixMs).toISOString() : '<unknown>'} (${age(n.registrationTimeUnixMs)} ago)`,
    `Connected:       ${s?.connected ? 'True' : 'False'} (last seen ${age(s?.lastSeenUnixMs ?? 0)} ago)`,
    `State:           ${shown(nodeState(node))}`,
    `Phase:           ${s?.phase || '<none>'}`,
    `Reason:          ${shown(reasonText(node.status?.reason)) || '<none>'}`,
    `Current Config:  ${s?.currentConfig || '<none>'}`,
    `Desired Config:  ${s?.desiredConfig || '<none>'}`,
    `Last Disruption: ${s?.lastDisruption || '<none>'}`,
    `Boot ID:         ${s?.bootId || '<unknown>'}`,
    `Agent Version:   ${s?.agentVersion || '<unknown>'}`,
    'OS:',
    os
      ? [`  Booted Image:      ${os.bootedImage || '<none>'}`, `  Kernel Type:       ${os.kernelType || 'default'}`, `  Kernel Arguments:  ${os.kernelArguments.join(' ') || '<none>'}`,
        `  Extensions:        ${os.extensions.join(', ') || '<none>'}`, `  Staged Image:      ${os.stagedImage || '<none>'}`].join('\n')
      : '  <not reported>',
    `Drift Policy:    ${s?.driftPolicy || '<not reported>'}`,
    ...(s?.drifted ? [`Conditions:`, indent(table(['TYPE', 'STATUS', 'REASON', 'AGE', 'MESSAGE'], [[s.drifted.type, s.drifted.status, s.drifted.reason, age(s.drifted.lastTransitionTimeUnixMs), shown(s.drifted.message)]]))] : []),
    'Drift:',
    s?.drift.length
      ? indent(table(['KIND', 'PATH', 'EXPECTED', 'ACTUAL', 'DETECTED'], s.drift.map((d) => [d.kind, d.path, d.expectedHash.slice(0, 16), d.actualHash.slice(0, 16) || '<missing>', age(d.detectedUnixMs) + ' ago'])))
      : '  <none>',
    // The pool's PinnedImageSets as the agent pulled and pinned them (MCO's
    // MachineConfigNode.status.pinnedImageSets), each failure with its image and reason.
    'Pinned Image Sets:',
    s?.pinnedImageSets.length
      ? indent(table(['NAME', 'STATE', 'IMAGES', 'GENERATION', 'FAILED IMAGE', 'REASON'], s.pinnedImageSets.map((p) => [
        p.name, p.state || '<unknown>', `${p.imagesDone}/${p.imagesTotal}`, `${p.currentGeneration || '<none>'}/${p.desiredGeneration}`,
        p.lastFailedImage || (p.lastFailureReason ? '<the set>' : '<none>'), p.lastFailureReason ? `${p.lastFailureCode ? `${p.lastFailureCode}: ` : ''}${p.lastFailureReason}` : '<none>',
      ])))
      : '  <none>',
  ];
  // Staging before the drain: shown once the node has staged (or tried to) a config.
  const st = s?.staging;
  if (st) {
    const bytes = Number(st.bytesTotal) ? `${Number(st.bytesDone)} of ${Number(st.bytesTotal)} bytes` : `${Number(st.bytesDone)} bytes`;
    lines.push('Staging:', `  Config:  ${st.config}`, `  State:   ${st.state}`, `  Bytes:   ${bytes}`,
      `  Reason:  ${shown(st.reason) || '<none>'}`, `  Started: ${Number(st.startedUnixMs) ? `${age(Number(st.startedUnixMs))} ago` : '<unknown>'}${Number(st.endedUnixMs) ? `, ended ${age(Number(st.endedUnixMs))} ago` : ''}`);
  }
  return lines.join('\n').replace(/\n+$/, '') + '\n';
}

function indent(text: string): string {
  return text.split('\n').map((l) => (l ? `  ${l}` : l)).join('\n');
}
