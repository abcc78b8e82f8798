// mcctl get / describe: tables shaped like `oc get`, or objects with -o yaml|json.

import { ConfigurationError, formatSelector } from '../../machineconfig/index.ts';
import type { MachineConfigPool__Output } from '../../runtime/generated/mcplane/v1/MachineConfigPool.ts';
import type { Node__Output } from '../../runtime/generated/mcplane/v1/Node.ts';
import { call } from '../client/call.ts';
import type { Clients } from '../client/connection.ts';
import { age, table } from '../format.ts';
import { condition, machineConfigObject, nodeObject, poolObject, renderedObject } from '../objects.ts';
import { formatObject, type OutputFormat } from '../output.ts';

export type ReadFormat = OutputFormat | 'table';

const RESOURCE_ALIASES: Record<string, 'pools' | 'nodes' | 'mc' | 'rendered'> = {
  pools: 'pools', pool: 'pools', mcp: 'pools', machineconfigpool: 'pools', machineconfigpools: 'pools',
  nodes: 'nodes', node: 'nodes',
  mc: 'mc', machineconfig: 'mc', machineconfigs: 'mc',
  rendered: 'rendered', renderedconfig: 'rendered', renderedconfigs: 'rendered',
};

export function resourceOf(name: string): 'pools' | 'nodes' | 'mc' | 'rendered' {
  const r = RESOURCE_ALIASES[name.toLowerCase()];
  if (!r) throw new ConfigurationError(`unknown resource "${name}": use pools (mcp), nodes, mc or rendered`);
  return r;
}

const list = (items: Record<string, unknown>[], format: OutputFormat, single: boolean): string =>
  formatObject(single ? items[0] : { apiVersion: 'v1', kind: 'List', items }, format);

export async function getCommand(c: Clients, resource: string, name: string | undefined, format: ReadFormat, pool?: string): Promise<string> {
  const r = resourceOf(resource);
  if (r === 'pools') {
    const pools = name
      ? [await call(c, c.status.getPool.bind(c.status), { name }, `get pool ${name}`)]
      : (await call(c, c.status.listPools.bind(c.status), {}, 'list pools')).pools;
    if (format !== 'table') return list(pools.map(poolObject), format, name !== undefined);
    return table(
      ['NAME', 'CONFIG', 'UPDATED', 'UPDATING', 'DEGRADED', 'MACHINECOUNT', 'READYMACHINECOUNT', 'UPDATEDMACHINECOUNT', 'DEGRADEDMACHINECOUNT', 'AGE'],
      pools.map((p) => [p.name, p.status?.configuration ?? '', condition(p, 'Updated'), condition(p, 'Updating'), condition(p, 'Degraded'),
        p.status?.machineCount ?? 0, p.status?.readyMachineCount ?? 0, p.status?.updatedMachineCount ?? 0, p.status?.degradedMachineCount ?? 0, age(p.creationTimeUnixMs)]),
    );
  }
  if (r === 'nodes') {
    const nodes = name
      ? [await call(c, c.status.getNode.bind(c.status), { name }, `get node ${name}`)]
      : (await call(c, c.status.listNodes.bind(c.status), { pool: pool ?? '' }, 'list nodes')).nodes;
    if (format !== 'table') return list(nodes.map(nodeObject), format, name !== undefined);
    return table(
      ['NAME', 'POOL', 'STATE', 'PHASE', 'CURRENTCONFIG', 'DESIREDCONFIG', 'CONNECTED', 'AGE'],
      nodes.map((n) => [n.name, n.pool || '<none>', n.status?.state ?? '', n.status?.phase ?? '', n.status?.currentConfig || '<none>', n.status?.desiredConfig || '<none>',
        n.status?.connected ? 'True' : 'False', age(n.registrationTimeUnixMs)]),
    );
  }
  if (r === 'mc') {
    const mcs = name
      ? [await call(c, c.config.getMachineConfig.bind(c.config), { name }, `get MachineConfig ${name}`)]
      : (await call(c, c.config.listMachineConfigs.bind(c.config), {}, 'list MachineConfigs')).machineConfigs;
    const objects = mcs.map(machineConfigObject);
    if (format !== 'table') return list(objects, format, name !== undefined);
    return table(['NAME', 'ROLE', 'FILES', 'UNITS', 'KERNELARGUMENTS', 'AGE'], objects.map((o, i) => {
      const mc = o as { metadata: { labels?: Record<string, string> }; spec: { config: { storage: { files: unknown[] }; systemd: { units: unknown[] } }; kernelArguments: string[] } };
      return [mcs[i]!.name, mc.metadata.labels?.['machineconfiguration.openshift.io/role'] ?? '', mc.spec.config.storage.files.length, mc.spec.config.systemd.units.length,
        mc.spec.kernelArguments.join(' ') || '<none>', age(mcs[i]!.creationTimeUnixMs)];
    }));
  }
  const rendered = name
    ? [await call(c, c.config.getRenderedConfig.bind(c.config), { name }, `get rendered config ${name}`)]
    : (await call(c, c.config.listRenderedConfigs.bind(c.config), { pool: pool ?? '' }, 'list rendered configs')).renderedConfigs;
  if (format !== 'table') return list(rendered.map(renderedObject), format, name !== undefined);
  return table(['NAME', 'POOL', 'SOURCES', 'INUSEBY', 'AGE'],
    rendered.map((r) => [r.name, r.pool, r.sources.length, new Set(r.referencedBy).size, age(r.creationTimeUnixMs)]));
}

export async function describeCommand(c: Clients, resource: string, name: string): Promise<string> {
  const r = resourceOf(resource);
  if (r === 'pools') {
    const pool = await call(c, c.status.getPool.bind(c.status), { name }, `describe pool ${name}`);
    const nodes = (await call(c, c.status.listNodes.bind(c.status), { pool: name }, 'list nodes')).nodes;
    return describePool(pool, nodes);
  }
  if (r === 'nodes') return describeNode(await call(c, c.status.getNode.bind(c.status), { name }, `describe node ${name}`));
  throw new ConfigurationError(`describe works on pools and nodes; for ${resource} use: mcctl get ${resource} ${name} -o yaml`);
}

function describePool(p: MachineConfigPool__Output, nodes: Node__Output[]): string {
  const spec = JSON.parse(p.specJson || '{}');
  const s = p.status;
  const lines = [
    `Name:                    ${p.name}`,
    `Paused:                  ${p.paused}`,
    `Max Unavailable:         ${p.maxUnavailable}`,
    `Machine Config Selector: ${formatSelector(spec.machineConfigSelector ?? null)}`,
    `Node Selector:           ${formatSelector(spec.nodeSelector ?? null)}`,
    `Drift Policy:            ${spec.driftPolicy ?? 'Degrade'}`,
    `Disruption Policy:       ${spec.disruptionPolicy ? JSON.stringify(spec.disruptionPolicy) : '<MCO defaults: reboot for files and units, none for SSH keys>'}`,
    `Configuration:           ${s?.configuration || '<none>'}`,
    `  Sources:               ${s?.configurationSources.join(', ') || '<none>'}`,
    `Machines:                ${s?.machineCount ?? 0} total, ${s?.updatedMachineCount ?? 0} updated, ${s?.readyMachineCount ?? 0} ready, ${s?.unavailableMachineCount ?? 0} unavailable, ${s?.degradedMachineCount ?? 0} degraded`,
    'Conditions:',
    indent(table(['TYPE', 'STATUS', 'REASON', 'AGE', 'MESSAGE'], (s?.conditions ?? []).map((c) => [c.type, c.status, c.reason, age(c.lastTransitionTimeUnixMs), c.message]))),
    'Nodes:',
    nodes.length
      ? indent(table(['NAME', 'STATE', 'PHASE', 'CURRENTCONFIG', 'CONNECTED', 'REASON'], nodes.map((n) => [n.name, n.status?.state ?? '', n.status?.phase ?? '', n.status?.currentConfig || '<none>', n.status?.connected ? 'True' : 'False', n.status?.reason ?? ''])))
      : '  <none>\n',
  ];
  return lines.join('\n').replace(/\n+$/, '') + '\n';
}

function describeNode(n: Node__Output): string {
  const s = n.status;
  const os = s?.os;
  const lines = [
    `Name:            ${n.name}`,
    `Pool:            ${n.pool || '<none>'}`,
    `Labels:          ${Object.entries(n.labels).map(([k, v]) => (v ? `${k}=${v}` : k)).join('\n                 ') || '<none>'}`,
    `Registered:      ${n.registrationTimeUnixMs ? new Date(n.registrationTimeUnixMs).toISOString() : '<unknown>'} (${age(n.registrationTimeUnixMs)} ago)`,
    `Connected:       ${s?.connected ? 'True' : 'False'} (last seen ${age(s?.lastSeenUnixMs ?? 0)} ago)`,
    `State:           ${s?.state ?? '<unknown>'}`,
    `Phase:           ${s?.phase || '<none>'}`,
    `Reason:          ${s?.reason || '<none>'}`,
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
    'Drift:',
    s?.drift.length
      ? indent(table(['KIND', 'PATH', 'EXPECTED', 'ACTUAL', 'DETECTED'], s.drift.map((d) => [d.kind, d.path, d.expectedHash.slice(0, 16), d.actualHash.slice(0, 16) || '<missing>', age(d.detectedUnixMs) + ' ago'])))
      : '  <none>',
  ];
  return lines.join('\n').replace(/\n+$/, '') + '\n';
}

function indent(text: string): string {
  return text.split('\n').map((l) => (l ? `  ${l}` : l)).join('\n');
}
