// mcctl apply / delete / pause / resume / node reapply.

import { ConfigurationError } from '../../machineconfig/index.ts';
import { call } from '../client/call.ts';
import type { Clients } from '../client/connection.ts';
import { loadManifestFiles } from '../manifest-files.ts';
import { resourceOf } from '../resources.ts';

const KIND_NAMES: Record<string, string> = { MachineConfig: 'machineconfig', MachineConfigPool: 'machineconfigpool', MachineConfiguration: 'machineconfiguration' };

export async function applyCommand(c: Clients, paths: string[], dryRun: boolean, warn: (text: string) => void = () => {}): Promise<string> {
  // The server validates; reading here gathers the texts (and reports unreadable files and
  // YAML syntax errors with their line, before any round trip).
  const { texts } = loadManifestFiles(paths);
  const res = await call(c, c.config.apply.bind(c.config), { manifests: texts, dryRun }, 'apply');
  for (const w of res.warnings ?? []) warn(`Warning: ${w}\n`);
  const suffix = dryRun ? ' (dry run)' : '';
  return res.objects.map((o) => `${KIND_NAMES[o.kind] ?? o.kind}/${o.name} ${o.action}${suffix}\n`).join('');
}

export async function deleteCommand(c: Clients, resource: string, name: string): Promise<string> {
  // MachineConfiguration/cluster (the cluster-wide disruption policy) can be deleted, not listed.
  const r = /^machineconfigurations?$/i.test(resource) ? 'machineconfiguration' : resourceOf(resource);
  const kind = r === 'mc' ? 'MachineConfig' : r === 'pools' ? 'MachineConfigPool' : r === 'nodes' ? 'Node' : r === 'machineconfiguration' ? 'MachineConfiguration' : undefined;
  if (!kind) throw new ConfigurationError(`cannot delete ${resource}: rendered configs are deleted by the server once no node uses them`);
  await call(c, c.config.delete.bind(c.config), { kind, name }, `delete ${kind}/${name}`);
  return `${KIND_NAMES[kind] ?? kind.toLowerCase()}/${name} deleted\n`;
}

export async function pauseCommand(c: Clients, resource: string, name: string, paused: boolean): Promise<string> {
  if (resourceOf(resource) !== 'pools') throw new ConfigurationError(`only pools can be ${paused ? 'paused' : 'resumed'}`);
  await call(c, c.config.setPoolPaused.bind(c.config), { name, paused }, `${paused ? 'pause' : 'resume'} pool ${name}`);
  return `machineconfigpool/${name} ${paused ? 'paused' : 'resumed'}\n`;
}

export async function reapplyCommand(c: Clients, name: string): Promise<string> {
  await call(c, c.config.reapplyNode.bind(c.config), { name }, `re-apply node ${name}`);
  return `node/${name}: full re-apply requested\n`;
}

/** `mcctl label node NAME KEY=VALUE ... KEY-`, as kubectl label reads its arguments. */
export async function labelCommand(c: Clients, name: string, changes: string[]): Promise<string> {
  const set: Record<string, string> = {};
  const remove: string[] = [];
  for (const change of changes) {
    if (change.endsWith('-') && !change.includes('=')) remove.push(change.slice(0, -1));
    else if (change.includes('=')) set[change.slice(0, change.indexOf('='))] = change.slice(change.indexOf('=') + 1);
    else throw new ConfigurationError(`"${change}" is neither KEY=VALUE (set a label) nor KEY- (remove one)`);
  }
  if (changes.length === 0) throw new ConfigurationError('give at least one KEY=VALUE or KEY- after the node name');
  const node = await call(c, c.config.labelNode.bind(c.config), { name, set, remove }, `label node ${name}`);
  return `node/${name} labeled${node.pool ? ` (pool ${node.pool})` : ''}\n`;
}
