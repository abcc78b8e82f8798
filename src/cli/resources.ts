// What `mcctl get` can list: for each resource its names, how to fetch it, its table columns
// (normal and -o wide), its Kubernetes-shaped object and its labels for -l.

import { API_KIND_NAMES, API_KINDS, describeNames, SOURCE_KINDS, typeNameOf, type ApiKind, type ApiKindInfo, type McctlName, type SourceKind, type SourcePlural } from '../machineconfig/api-kinds.ts';
import { ConfigurationError, NotFoundError } from '../machineconfig/errors.ts';
import { formatSelector } from '../machineconfig/label-selector.ts';
import type { Labels } from '../machineconfig/index.ts';
import type { MachineConfig__Output } from '../runtime/generated/mcplane/v1/MachineConfig.ts';
import type { MachineConfigPool__Output } from '../runtime/generated/mcplane/v1/MachineConfigPool.ts';
import type { Node__Output } from '../runtime/generated/mcplane/v1/Node.ts';
import type { RenderedConfig__Output } from '../runtime/generated/mcplane/v1/RenderedConfig.ts';
import type { Replica__Output } from '../runtime/generated/mcplane/v1/Replica.ts';
import type { BootstrapToken__Output } from '../runtime/generated/mcplane/v1/BootstrapToken.ts';
import type { EnrollmentRequest__Output } from '../runtime/generated/mcplane/v1/EnrollmentRequest.ts';
import type { SourceObject__Output } from '../runtime/generated/mcplane/v1/SourceObject.ts';
import type { AuditRecord__Output } from '../runtime/generated/mcplane/v1/AuditRecord.ts';
import type { MachineConfigNode__Output } from '../runtime/generated/mcplane/v1/MachineConfigNode.ts';
import { machineConfigNodeObject, type MachineConfigNode } from '../machineconfig/machine-config-node.ts';
import { call } from './client/call.ts';
import type { Clients } from './client/connection.ts';
import { age } from './format.ts';
import { events } from './events.ts';
import { condition, machineConfigObject, nodeObject, poolObject, renderedObject, replicaObject } from './objects.ts';

/** mcctl's resources: its own, the catalogue's kinds under their mcctl names (pools, nodes, mc, mcn) and the higher-level configs. */
export type ResourceName = McctlName | 'rendered' | 'replicas' | 'events' | 'tokens' | 'enrollments' | 'audit' | 'drift' | SourceResourceName;

/** MCO's MachineConfigNode: derived by the server from each node's records (a derived catalogue kind). */
const MCN = API_KINDS.MachineConfigNode;
/** The higher-level configs (the catalogue's source kinds), one resource per kind, under its plural. */
export type SourceResourceName = SourcePlural;

/** The higher-level configs' kinds by their resource name. */
export const SOURCE_RESOURCE_KINDS = Object.fromEntries(SOURCE_KINDS.map((kind) => [API_KINDS[kind].plural, kind])) as Record<SourceResourceName, SourceKind>;

/** The resource `mcctl get` lists each API kind under (MachineConfiguration is none: it is deleted, not listed). */
export const API_KIND_RESOURCES: Partial<Record<ApiKind, ResourceName>> = Object.fromEntries(API_KIND_NAMES.flatMap((kind) => {
  const k: ApiKindInfo = API_KINDS[kind];
  const name = k.mcctlName ?? (k.source ? k.plural : undefined);
  return name === undefined ? [] : [[kind, name as ResourceName]];
}));

/** The API kind a resource name is, for delete; undefined for mcctl's own resources (rendered, events, ...). */
export function kindOfResource(r: ResourceName): ApiKind | undefined {
  return (Object.entries(API_KIND_RESOURCES) as [ApiKind, ResourceName][]).find(([, name]) => name === r)?.[0];
}

export interface Resource<T> {
  name: ResourceName;
  /** The TYPE of `-o name` (TYPE/NAME), kubectl's lower-case kind. */
  typeName: string;
  list(c: Clients, filter: { pool?: string; node?: string; sinceMs?: number }): Promise<T[]>;
  get(c: Clients, name: string): Promise<T>;
  nameOf(item: T): string;
  object(item: T): Record<string, unknown>;
  /** Labels for -l; undefined when the server does not send this resource's labels. */
  labels(item: T): Labels | undefined;
  columns: string[];
  wideColumns: string[];
  row(item: T, wide: boolean): (string | number)[];
  /** For get -w: a row as wide as any this object may show later (the normal columns). */
  widest?(item: T): (string | number)[];
  /** Which side of StatusService.Watch carries this resource, for -w. */
  watch?: 'pool' | 'node' | 'event';
}

export const ALIASES: Readonly<Record<string, ResourceName>> = {
  pools: 'pools', pool: 'pools',
  rendered: 'rendered', renderedconfig: 'rendered', renderedconfigs: 'rendered',
  replicas: 'replicas', replica: 'replicas',
  events: 'events', event: 'events', ev: 'events',
  tokens: 'tokens', token: 'tokens', bootstraptoken: 'tokens', bootstraptokens: 'tokens',
  audit: 'audit', audits: 'audit', auditrecord: 'audit', auditrecords: 'audit',
  drift: 'drift', drifts: 'drift', nodedrift: 'drift', nodedrifts: 'drift',
  enrollments: 'enrollments', enrollment: 'enrollments', enrollmentrequest: 'enrollments', enrollmentrequests: 'enrollments', er: 'enrollments',
  // An API kind is also known by its kind, its plural and its short names (kubectl's).
  ...Object.fromEntries((Object.entries(API_KIND_RESOURCES) as [ApiKind, ResourceName][]).flatMap(([kind, r]) => [kind.toLowerCase(), API_KINDS[kind].plural, ...API_KINDS[kind].shortNames].map((alias) => [alias, r]))),
};

/** How the higher-level configs are named in the unknown-resource message: kind, then short names. */
const SOURCE_NAMES = SOURCE_KINDS.map((kind) => {
  const short: readonly string[] = API_KINDS[kind].shortNames;
  return short.length ? `${kind.toLowerCase()} (${short.join(', ')})` : kind.toLowerCase();
});

export function resourceOf(name: string): ResourceName {
  const r = ALIASES[name.toLowerCase()];
  if (!r) throw new ConfigurationError(`unknown resource "${name}": use pools (mcp), nodes, mc, rendered, ${describeNames('MachineConfigNode')}, replicas, events, tokens, enrollments, audit, drift, ${SOURCE_NAMES.slice(0, -1).join(', ')} or ${SOURCE_NAMES.at(-1)}`);
  return r;
}

/** ListNodes in pages, as Kubernetes clients list: a fleet of 10,000 nodes is not one message. */
export const NODE_PAGE_SIZE = 500;

async function listAllNodes(c: Clients, pool: string): Promise<Node__Output[]> {
  const nodes: Node__Output[] = [];
  const seen = new Set<string>();
  let continueToken = '';
  for (;;) {
    const page = await call(c, c.status.listNodes.bind(c.status), { pool, limit: NODE_PAGE_SIZE, continueToken }, 'list nodes');
    nodes.push(...page.nodes);
    // A token seen before would loop forever: stop rather than trust a confused server.
    if (!page.continueToken || seen.has(page.continueToken)) return nodes;
    seen.add(page.continueToken);
    continueToken = page.continueToken;
  }
}

const pools: Resource<MachineConfigPool__Output> = {
  name: 'pools',
  typeName: 'machineconfigpool',
  list: async (c) => (await call(c, c.status.listPools.bind(c.status), {}, 'list pools')).pools,
  get: (c, name) => call(c, c.status.getPool.bind(c.status), { name }, `get pool ${name}`),
  nameOf: (p) => p.name,
  object: poolObject,
  labels: (p) => p.labels,
  columns: ['NAME', 'CONFIG', 'UPDATED', 'UPDATING', 'DEGRADED', 'MACHINECOUNT', 'READYMACHINECOUNT', 'UPDATEDMACHINECOUNT', 'DEGRADEDMACHINECOUNT', 'AGE'],
  wideColumns: ['PAUSED', 'MAXUNAVAILABLE', 'NODESELECTOR', 'WINDOW'],
  widest: (p) => [p.name, `rendered-${p.name}-${'0'.repeat(32)}`, 'Unknown', 'Unknown', 'Unknown', 99999, 99999, 99999, 99999, '0h00m'],
  row: (p, wide) => {
    const s = p.status;
    const row: (string | number)[] = [p.name, s?.configuration || '', condition(p, 'Updated'), condition(p, 'Updating'), condition(p, 'Degraded'),
      s?.machineCount ?? 0, s?.readyMachineCount ?? 0, s?.updatedMachineCount ?? 0, s?.degradedMachineCount ?? 0, age(p.creationTimeUnixMs)];
    if (wide) {
      const spec = JSON.parse(p.specJson || '{}') as { nodeSelector?: never };
      row.push(p.paused ? 'True' : 'False', p.maxUnavailable || '1', formatSelector(spec.nodeSelector ?? null), s?.maintenanceWindow || '-');
    }
    return row;
  },
  watch: 'pool',
};

/** What STATE shows: the node's state, except that a node that has never applied a config is not
 * "Done" with nothing (the server's initial state for a registered host), nor Working on a first
 * config its agent has not taken yet (phase `assigned`), but New. */
export function nodeState(n: Node__Output): string {
  const s = n.status;
  if (!s) return '<unknown>';
  if (!s.currentConfig && (s.state === 'Done' || (s.state === 'Working' && s.phase === 'assigned'))) return 'New';
  return s.state;
}

/** Every state STATE can show, for get -w's column width. */
const WIDEST_STATE = ['Done', 'Working', 'Degraded', 'Unreconcilable', 'RolledBack', 'TryReverted', 'New'].reduce((a, b) => (b.length > a.length ? b : a));

/** A reason as one line: agents report command output, whose trailing newline is no part of it. */
export function reasonText(reason: string | undefined): string {
  return (reason ?? '').trim();
}

/** Time left on a node's certificate, in AGE's units (89d, 3h); "expired" once it has run out. */
function certExpires(notAfterUnixMs: number, now = Date.now()): string {
  if (!notAfterUnixMs) return '<unknown>';
  return notAfterUnixMs <= now ? 'expired' : age(now, notAfterUnixMs);
}

const nodes: Resource<Node__Output> = {
  name: 'nodes',
  typeName: 'node',
  list: (c, f) => listAllNodes(c, f.pool ?? ''),
  get: (c, name) => call(c, c.status.getNode.bind(c.status), { name }, `get node ${name}`),
  nameOf: (n) => n.name,
  object: nodeObject,
  labels: (n) => n.labels,
  columns: ['NAME', 'POOL', 'STATE', 'PHASE', 'CURRENTCONFIG', 'DESIREDCONFIG', 'CONNECTED', 'AGE'],
  wideColumns: ['ZONE', 'AGENT-VERSION', 'CERT-EXPIRES', 'REASON'],
  row: (n, wide) => {
    const s = n.status;
    const row: (string | number)[] = [n.name, n.pool || '<none>', nodeState(n), s?.phase || '<none>', s?.currentConfig || '<none>', s?.desiredConfig || '<none>',
      s?.connected ? 'True' : 'False', age(n.registrationTimeUnixMs)];
    if (wide) row.push(n.labels['topology.kubernetes.io/zone'] || '<none>', s?.agentVersion || '<unknown>', certExpires(n.certificateNotAfterUnixMs), reasonText(s?.reason) || '<none>');
    return row;
  },
  // get -w lays out its table once: each column as wide as the widest value it may take later
  // (any state and phase, a rendered config of the node's pool, any AGE) keeps rows aligned.
  widest: (n) => {
    const config = `rendered-${n.pool}-${'0'.repeat(32)}`;
    return [n.name, n.pool || '<none>', WIDEST_STATE, 'validate', config, config, 'False', '0h00m'];
  },
  watch: 'node',
};

interface McShape { metadata: { labels?: Labels }; spec: { config: { storage: { files: unknown[] }; systemd: { units: unknown[] } }; kernelArguments: string[]; kernelType?: string; osImageURL?: string } }

/** An item of `get mc`: a MachineConfig as applied, or a rendered one (a RenderedConfig on the wire). */
type McItem = MachineConfig__Output | RenderedConfig__Output;
const isRendered = (item: McItem): item is RenderedConfig__Output => 'specJson' in item;
const isNotFound = (err: unknown): boolean => (err as { grpcCode?: number }).grpcCode === 5 || (err as { code?: string }).code === 'MCPLANE_NOT_FOUND';

/** The spec of a user MachineConfig or of a rendered one, for the table's counts. */
function mcSpec(item: McItem): { labels: Labels; spec: McShape['spec'] } {
  if (isRendered(item)) {
    const spec = (item.specJson ? JSON.parse(item.specJson) : {}) as Partial<McShape['spec']>;
    return { labels: {}, spec: { kernelArguments: [], ...spec, config: { storage: { files: spec.config?.storage?.files ?? [] }, systemd: { units: spec.config?.systemd?.units ?? [] } } } };
  }
  const mc = JSON.parse(item.manifestJson) as McShape;
  return { labels: mc.metadata.labels ?? {}, spec: mc.spec };
}

// `oc get mc` lists the rendered configs among the others (they are MachineConfigs there), and
// `oc get mc rendered-worker-<hash>` shows one: so does mcctl. ROLE is the role label of a user
// config and the pool of a rendered one; GENERATEDBY says which is which (oc's
// GENERATEDBYCONTROLLER column).
const machineConfigs: Resource<McItem> = {
  name: 'mc',
  typeName: 'machineconfig',
  list: async (c) => {
    const [user, generated] = await Promise.all([
      call(c, c.config.listMachineConfigs.bind(c.config), {}, 'list MachineConfigs'),
      call(c, c.config.listRenderedConfigs.bind(c.config), { pool: '' }, 'list rendered configs'),
    ]);
    return [...user.machineConfigs, ...generated.renderedConfigs].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  },
  get: async (c, name) => {
    try {
      return await call(c, c.config.getMachineConfig.bind(c.config), { name }, `get MachineConfig ${name}`);
    } catch (err) {
      // Not a config someone applied: it may be one the server rendered.
      if (!isNotFound(err) || !name.startsWith('rendered-')) throw err;
      try {
        return await call(c, c.config.getRenderedConfig.bind(c.config), { name }, `get rendered config ${name}`);
      } catch (renderedErr) {
        if (isNotFound(renderedErr)) throw err;
        throw renderedErr;
      }
    }
  },
  nameOf: (mc) => mc.name,
  object: (item) => (isRendered(item) ? renderedObject(item) : machineConfigObject(item)),
  labels: (item) => mcSpec(item).labels,
  columns: ['NAME', 'ROLE', 'GENERATEDBY', 'FILES', 'UNITS', 'KERNELARGUMENTS', 'AGE'],
  wideColumns: ['KERNELTYPE', 'OSIMAGEURL'],
  row: (item, wide) => {
    const { labels, spec } = mcSpec(item);
    const role = isRendered(item) ? item.pool : labels['machineconfiguration.openshift.io/role'] ?? '';
    const row: (string | number)[] = [item.name, role || '<none>', isRendered(item) ? 'mcplane-server' : '<user>', spec.config.storage.files.length,
      spec.config.systemd.units.length, spec.kernelArguments.join(' ') || '<none>', age(item.creationTimeUnixMs)];
    if (wide) row.push(spec.kernelType || 'default', spec.osImageURL || '<none>');
    return row;
  },
};

const rendered: Resource<RenderedConfig__Output> = {
  name: 'rendered',
  typeName: 'machineconfig',
  list: async (c, f) => (await call(c, c.config.listRenderedConfigs.bind(c.config), { pool: f.pool ?? '' }, 'list rendered configs')).renderedConfigs,
  get: (c, name) => call(c, c.config.getRenderedConfig.bind(c.config), { name }, `get rendered config ${name}`),
  nameOf: (r) => r.name,
  object: renderedObject,
  labels: () => ({}),
  columns: ['NAME', 'POOL', 'SOURCES', 'INUSEBY', 'AGE'],
  wideColumns: ['SOURCENAMES', 'NODES'],
  row: (r, wide) => {
    const row: (string | number)[] = [r.name, r.pool, r.sources.length, new Set(r.referencedBy).size, age(r.creationTimeUnixMs)];
    if (wide) row.push(r.sources.join(',') || '<none>', [...new Set(r.referencedBy)].join(',') || '<none>');
    return row;
  },
};

/** The wire's MachineConfigNode as the builder made it (a generation of 0 is one MCO leaves out). */
function machineConfigNodeOfWire(m: MachineConfigNode__Output): MachineConfigNode {
  const gen = (n: number) => (Number(n) > 0 ? Number(n) : undefined);
  const s = m.status;
  return {
    name: m.name,
    pool: m.pool,
    creationTime: Number(m.creationTimeUnixMs),
    desiredConfig: m.desiredConfig,
    status: {
      currentConfig: s?.currentConfig ?? '',
      desiredConfig: s?.desiredConfig ?? '',
      observedGeneration: Number(s?.observedGeneration ?? 0),
      conditions: (s?.conditions ?? []).map((c) => ({ type: c.type, status: c.status as 'True' | 'False' | 'Unknown', reason: c.reason, message: c.message, lastTransitionTime: Number(c.lastTransitionTimeUnixMs) })),
      pinnedImageSets: (s?.pinnedImageSets ?? []).map((p) => ({
        name: p.name,
        ...(gen(p.desiredGeneration) ? { desiredGeneration: gen(p.desiredGeneration) } : {}),
        ...(gen(p.currentGeneration) ? { currentGeneration: gen(p.currentGeneration) } : {}),
        ...(gen(p.lastFailedGeneration) ? { lastFailedGeneration: gen(p.lastFailedGeneration), lastFailedGenerationError: p.lastFailedGenerationError } : {}),
      })),
      irreconcilableChanges: (s?.irreconcilableChanges ?? []).map((c) => ({ fieldPath: c.fieldPath, diff: c.diff })),
    },
  };
}

const mcnCondition = (m: MachineConfigNode__Output, type: string): string => m.status?.conditions.find((c) => c.type === type)?.status ?? '';

/** `oc get mcn`: the CRD's printer columns, priority 0 normally, priority 1 with -o wide. */
const machineConfigNodes: Resource<MachineConfigNode__Output> = {
  name: MCN.mcctlName,
  typeName: typeNameOf('MachineConfigNode'),
  list: async (c, f) => (await call(c, c.status.listMachineConfigNodes.bind(c.status), { pool: f.pool ?? '' }, `list ${MCN.plural}`)).machineConfigNodes,
  get: (c, name) => call(c, c.status.getMachineConfigNode.bind(c.status), { name }, `get ${typeNameOf('MachineConfigNode')} ${name}`),
  nameOf: (m) => m.name,
  object: (m) => machineConfigNodeObject(machineConfigNodeOfWire(m)),
  labels: () => undefined,
  columns: ['NAME', 'POOLNAME', 'DESIREDCONFIG', 'CURRENTCONFIG', 'UPDATED', 'AGE'],
  wideColumns: ['UPDATEPREPARED', 'UPDATEEXECUTED', 'UPDATEPOSTACTIONCOMPLETE', 'UPDATECOMPLETE', 'RESUMED', 'UPDATEDFILESANDOS', 'CORDONEDNODE', 'DRAINEDNODE', 'REBOOTEDNODE', 'UNCORDONEDNODE'],
  row: (m, wide) => {
    const row: (string | number)[] = [m.name, m.pool, m.desiredConfig, m.status?.currentConfig ?? '', mcnCondition(m, 'Updated'), age(Number(m.creationTimeUnixMs))];
    if (wide) row.push(...['UpdatePrepared', 'UpdateExecuted', 'UpdatePostActionComplete', 'UpdateComplete', 'Resumed', 'AppliedFilesAndOS', 'Cordoned', 'Drained', 'RebootedNode', 'Uncordoned'].map((t) => mcnCondition(m, t)));
    return row;
  },
};

const replicas: Resource<Replica__Output> = {
  name: 'replicas',
  typeName: 'replica',
  list: async (c) => (await call(c, c.status.listReplicas.bind(c.status), {}, 'list replicas')).replicas,
  get: async (c, name) => {
    const found = (await call(c, c.status.listReplicas.bind(c.status), {}, 'list replicas')).replicas.find((r) => r.name === name);
    if (!found) throw new NotFoundError('Replica', name);
    return found;
  },
  nameOf: (r) => r.name,
  object: replicaObject,
  labels: () => undefined,
  columns: ['NAME', 'ADDRESS', 'LEADER', 'AGENTS', 'LAST-HEARTBEAT', 'VERSION', 'AGE'],
  wideColumns: [],
  row: (r) => [r.name, r.address || '<none>', r.leader ? 'True' : 'False', r.agentsConnected, r.lastHeartbeatUnixMs ? `${age(r.lastHeartbeatUnixMs)} ago` : '<never>',
    r.version || '<unknown>', age(r.startedUnixMs)],
};

const tokens: Resource<BootstrapToken__Output> = {
  name: 'tokens',
  typeName: 'bootstraptoken',
  list: async (c) => (await call(c, c.identity.listBootstrapTokens.bind(c.identity), {}, 'list bootstrap tokens')).tokens,
  get: async (c, id) => {
    const found = (await call(c, c.identity.listBootstrapTokens.bind(c.identity), {}, 'list bootstrap tokens')).tokens.find((t) => t.id === id);
    if (!found) throw new NotFoundError('BootstrapToken', id);
    return found;
  },
  nameOf: (t) => t.id,
  object: (t) => ({
    apiVersion: 'mcplane.io/v1', kind: 'BootstrapToken',
    metadata: { name: t.id, creationTimestamp: new Date(Number(t.createdUnixMs)).toISOString() },
    spec: { pool: t.pool, ...(Number(t.expiresUnixMs) ? { expires: new Date(Number(t.expiresUnixMs)).toISOString() } : {}), description: t.description, createdBy: t.createdBy },
  }),
  labels: () => undefined,
  columns: ['ID', 'POOL', 'EXPIRES', 'DESCRIPTION', 'AGE'],
  wideColumns: ['CREATED-BY'],
  row: (t, wide) => {
    const expires = Number(t.expiresUnixMs);
    const now = Date.now();
    const row: (string | number)[] = [t.id, t.pool, !expires ? '<never>' : expires <= now ? 'expired' : `in ${age(now, expires)}`, t.description || '<none>', age(Number(t.createdUnixMs))];
    if (wide) row.push(t.createdBy || '<unknown>');
    return row;
  },
};

/** How many characters of a request's id a table shows: enough to tell requests apart and to type. */
const SHORT_ID = 16;

const listEnrollments = async (c: Clients): Promise<EnrollmentRequest__Output[]> =>
  (await call(c, c.identity.listEnrollmentRequests.bind(c.identity), {}, 'list enrollment requests')).requests;

const enrollments: Resource<EnrollmentRequest__Output> = {
  name: 'enrollments',
  typeName: 'enrollmentrequest',
  list: listEnrollments,
  // By id, id prefix or node name, as approve and deny take them.
  get: async (c, name) => {
    const all = await listEnrollments(c);
    const found = all.filter((r) => r.id === name).concat(all.filter((r) => r.id !== name && name.length >= 8 && r.id.startsWith(name)), all.filter((r) => r.nodeName === name && r.id !== name));
    if (found.length === 0) throw new NotFoundError('EnrollmentRequest', name);
    return found[0]!;
  },
  nameOf: (r) => r.id,
  object: (r) => ({
    apiVersion: 'mcplane.io/v1', kind: 'EnrollmentRequest',
    metadata: { name: r.id, creationTimestamp: new Date(Number(r.requestedUnixMs)).toISOString() },
    spec: { nodeName: r.nodeName, pool: r.pool, address: r.address, labels: r.labels },
    status: {
      state: r.state,
      ...(r.decidedBy ? { decidedBy: r.decidedBy, decidedAt: new Date(Number(r.decidedUnixMs)).toISOString() } : {}),
      ...(r.reason ? { reason: r.reason } : {}),
      ...(r.certificateSerial ? { certificateSerial: r.certificateSerial } : {}),
      expires: new Date(Number(r.expiresUnixMs)).toISOString(),
    },
  }),
  labels: () => undefined,
  columns: ['ID', 'NODE', 'POOL', 'STATE', 'ADDRESS', 'AGE'],
  wideColumns: ['DECIDED-BY', 'REASON', 'LABELS'],
  row: (r, wide) => {
    const row: (string | number)[] = [r.id.slice(0, SHORT_ID), r.nodeName, r.pool, r.state, r.address || '<unknown>', age(Number(r.requestedUnixMs))];
    if (wide) row.push(r.decidedBy || '<none>', r.reason || '<none>', Object.entries(r.labels).map(([k, v]) => `${k}=${v}`).join(',') || '<none>');
    return row;
  },
};

const listAudit = async (c: Clients, sinceMs = 0): Promise<AuditRecord__Output[]> =>
  (await call(c, c.identity.listAuditRecords.bind(c.identity), { sinceUnixMs: sinceMs, limit: 0 }, 'list audit records')).records;

// Labels for -l: who (user, role), what (method) and the outcome (result), e.g.
// `mcctl get audit -l result!=OK` for the refusals, `-l user=alice`.
const auditLabels = (r: AuditRecord__Output): Labels => ({ user: r.subject.match(/(?:^|, )CN=([^,]*)/)?.[1] ?? '', role: r.role, method: r.method.split('/').at(-1) ?? r.method, result: r.result });

const audit: Resource<AuditRecord__Output> = {
  name: 'audit',
  typeName: 'auditrecord',
  list: (c, f) => listAudit(c, f.sinceMs),
  get: async (c, id) => {
    const found = (await listAudit(c)).find((r) => r.id === id);
    if (!found) throw new NotFoundError('AuditRecord', id);
    return found;
  },
  nameOf: (r) => r.id,
  object: (r) => ({
    apiVersion: 'mcplane.io/v1', kind: 'AuditRecord',
    metadata: { name: r.id, creationTimestamp: new Date(Number(r.timeUnixMs)).toISOString(), labels: auditLabels(r) },
    user: { subject: r.subject, serial: r.serial, role: r.role, ...(r.pools.length ? { pools: r.pools } : {}) },
    sourceAddress: r.peer,
    method: r.method,
    objects: r.objects.map((o) => ({ kind: o.kind, name: o.name })),
    result: r.result,
    ...(r.message ? { message: r.message } : {}),
    replica: r.replica,
  }),
  labels: auditLabels,
  columns: ['TIME', 'USER', 'ROLE', 'METHOD', 'OBJECTS', 'RESULT'],
  wideColumns: ['SOURCE', 'SERIAL', 'MESSAGE'],
  row: (r, wide) => {
    const row: (string | number)[] = [new Date(Number(r.timeUnixMs)).toISOString(), auditLabels(r).user || r.subject, r.role + (r.pools.length ? `(${r.pools.join(',')})` : ''),
      r.method, r.objects.map((o) => `${o.kind}/${o.name}`).join(',') || '<none>', r.result];
    if (wide) row.push(r.peer, r.serial || '<none>', r.message || '<none>');
    return row;
  },
};

// `mcctl get drift`: the nodes reporting drift, one row each, with the drift policy their agent
// acted on and the paths. Read from the nodes' status (GetDriftProposal has the content).
const driftedNodes = (nodes: Node__Output[]): Node__Output[] => nodes.filter((n) => (n.status?.drift.length ?? 0) > 0);
const driftPaths = (n: Node__Output): string => n.status!.drift.map((d) => d.path).join(',');
const adoptable = (n: Node__Output): string => {
  if (n.status?.driftPolicy !== 'Adopt') return '<not Adopt>';
  const files = n.status.drift.filter((d) => d.kind === 'file' && d.path.startsWith('/') && !d.contentOmitted && d.actualHash !== '');
  return `${files.length}/${n.status.drift.length}`;
};

const drift: Resource<Node__Output> = {
  name: 'drift',
  typeName: 'nodedrift',
  list: async (c, f) => driftedNodes(await listAllNodes(c, f.pool ?? '')),
  get: async (c, name) => {
    const node = await call(c, c.status.getNode.bind(c.status), { name }, `get node ${name}`);
    if (!driftedNodes([node]).length) throw new NotFoundError('NodeDrift', name);
    return node;
  },
  nameOf: (n) => n.name,
  object: (n) => ({
    apiVersion: 'mcplane.io/v1', kind: 'NodeDrift',
    metadata: { name: n.name, labels: n.labels },
    pool: n.pool,
    policy: n.status?.driftPolicy || 'Degrade',
    state: n.status?.state ?? '',
    ...(n.status?.drifted ? { condition: n.status.drifted } : {}),
    drift: (n.status?.drift ?? []).map((d) => ({
      kind: d.kind, path: d.path, expectedHash: d.expectedHash, actualHash: d.actualHash, detected: new Date(Number(d.detectedUnixMs)).toISOString(),
      ...(d.mode ? { mode: d.mode, user: d.user, group: d.group } : {}),
      ...(d.contentOmitted ? { contentOmitted: d.contentOmitted } : {}),
    })),
  }),
  labels: (n) => n.labels,
  columns: ['NODE', 'POOL', 'POLICY', 'STATE', 'PATHS', 'DETECTED'],
  wideColumns: ['ADOPTABLE', 'REASON'],
  row: (n, wide) => {
    const s = n.status!;
    const first = Math.min(...s.drift.map((d) => Number(d.detectedUnixMs) || Date.now()));
    const row: (string | number)[] = [n.name, n.pool || '<none>', s.driftPolicy || '<unknown>', nodeState(n), driftPaths(n), age(first)];
    if (wide) row.push(adoptable(n), reasonText(s.reason) || '<none>');
    return row;
  },
};

interface SourceStatus {
  conditions: { type: string; status: string; reason?: string; message: string }[];
  generated: string[];
}

/** A higher-level config: its conditions (MCO's) and the MachineConfigs generated from it. */
function sourceResource(name: SourceResourceName, kind: string): Resource<SourceObject__Output> {
  const list = async (c: Clients): Promise<SourceObject__Output[]> => (await call(c, c.config.listSourceObjects.bind(c.config), { kind }, `list ${kind}`)).objects;
  const status = (o: SourceObject__Output): SourceStatus => JSON.parse(o.statusJson || '{}') as SourceStatus;
  // MCO's outcome is the last condition (KubeletConfig: the legacy Success/Failure after Accepted);
  // where conditions carry reasons (CRIOCredentialProviderConfig), the reason of the first that
  // is False, else of the last.
  const outcome = (o: SourceObject__Output): { type: string; message: string } | undefined => {
    const conditions = status(o).conditions ?? [];
    const shown = conditions.some((c) => c.reason) ? conditions.find((c) => c.status === 'False') ?? conditions.at(-1) : conditions.at(-1);
    return shown && { type: shown.reason ?? shown.type, message: shown.message };
  };
  return {
    name,
    typeName: kind.toLowerCase(),
    list,
    get: async (c, n) => {
      const found = (await list(c)).find((o) => o.name === n);
      if (!found) throw new NotFoundError(kind, n);
      return found;
    },
    nameOf: (o) => o.name,
    object: (o) => {
      const manifest = JSON.parse(o.manifestJson) as Record<string, unknown> & { metadata: Record<string, unknown> };
      const s = status(o);
      return {
        ...manifest,
        metadata: { ...manifest.metadata, resourceVersion: o.resourceVersion, creationTimestamp: new Date(Number(o.creationTimeUnixMs)).toISOString() },
        // `generatedMachineConfigs` is mcplane's: MCO keeps the same list in the finalizers.
        status: { conditions: s.conditions ?? [], generatedMachineConfigs: s.generated ?? [] },
      };
    },
    labels: (o) => (JSON.parse(o.manifestJson) as { metadata: { labels?: Labels } }).metadata.labels ?? {},
    columns: ['NAME', 'STATUS', 'GENERATED', 'AGE'],
    wideColumns: ['MESSAGE'],
    row: (o, wide) => {
      const last = outcome(o);
      const row: (string | number)[] = [o.name, last?.type ?? '<pending>', (status(o).generated ?? []).join(',') || '<none>', age(Number(o.creationTimeUnixMs))];
      if (wide) row.push(last?.message ?? '');
      return row;
    },
  };
}

/**
 * PinnedImageSets generate nothing: `oc get pinnedimagesets` shows NAME and AGE; mcplane adds the
 * image count, and -o wide the pools that name the set. Its generation (what the nodes report as
 * desired) is the store revision that last changed it, shown as metadata.generation.
 */
function pinnedImageSetResource(base: Resource<SourceObject__Output>): Resource<SourceObject__Output> {
  const manifest = (o: SourceObject__Output) => JSON.parse(o.manifestJson) as { metadata: Record<string, unknown>; spec: { pinnedImages: { name: string }[] } };
  const pools = (o: SourceObject__Output): string[] => (JSON.parse(o.statusJson || '{}') as { pools?: string[] }).pools ?? [];
  return {
    ...base,
    object: (o) => {
      const m = manifest(o);
      return { ...m, metadata: { ...m.metadata, generation: Number(o.resourceVersion), resourceVersion: o.resourceVersion, creationTimestamp: new Date(Number(o.creationTimeUnixMs)).toISOString() }, status: {} };
    },
    columns: ['NAME', 'IMAGES', 'AGE'],
    wideColumns: ['POOLS'],
    row: (o, wide) => {
      const row: (string | number)[] = [o.name, manifest(o).spec.pinnedImages.length, age(Number(o.creationTimeUnixMs))];
      if (wide) row.push(pools(o).join(',') || '<none>');
      return row;
    },
  };
}

const sourceResources = Object.fromEntries(Object.entries(SOURCE_RESOURCE_KINDS).map(([r, kind]) => {
  const resource = sourceResource(r as SourceResourceName, kind);
  return [r, kind === 'PinnedImageSet' ? pinnedImageSetResource(resource) : resource];
})) as Record<SourceResourceName, Resource<SourceObject__Output>>;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const RESOURCES: Record<ResourceName, Resource<any>> = { pools, nodes, mc: machineConfigs, rendered, [MCN.mcctlName]: machineConfigNodes, replicas, events, tokens, enrollments, audit, drift, ...sourceResources };
