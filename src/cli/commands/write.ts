// mcctl apply / delete / pause / resume / confirm / node reapply.

import { ConfigurationError, formatDuration } from '../../machineconfig/index.ts';
import { call } from '../client/call.ts';
import type { Clients } from '../client/connection.ts';
import type { NodePreview__Output } from '../../runtime/generated/mcplane/v1/NodePreview.ts';
import type { PoolPreview__Output } from '../../runtime/generated/mcplane/v1/PoolPreview.ts';
import type { RenderedDiff__Output } from '../../runtime/generated/mcplane/v1/RenderedDiff.ts';
import { forDisplay, table } from '../format.ts';
import { loadManifestFiles } from '../manifest-files.ts';
import { formatObject, type OutputFormat } from '../output.ts';
import { kindOfResource, resourceOf } from '../resources.ts';


export async function applyCommand(c: Clients, paths: string[], dryRun: boolean, warn: (text: string) => void = () => {}, output?: OutputFormat, tryTimeout = ''): Promise<string> {
  // The server validates (the --try timeout too); reading here gathers the texts (and reports
  // unreadable files and YAML syntax errors with their line, before any round trip).
  const { texts } = loadManifestFiles(paths);
  const res = await call(c, c.config.apply.bind(c.config), { manifests: texts, dryRun, try: tryTimeout }, 'apply');
  for (const w of res.warnings ?? []) warn(`Warning: ${w}\n`);
  if (output) {
    return formatObject(dryRun ? { objects: res.objects, pools: res.poolPreviews, nodes: res.nodePreviews } : { objects: res.objects }, output);
  }
  const suffix = dryRun ? ' (dry run)' : '';
  // The server's answer as text for people: its strings with their control characters escaped.
  const shown = forDisplay(res);
  const lines = shown.objects.map((o) => `${o.kind.toLowerCase()}/${o.name} ${o.action}${suffix}\n`).join('');
  return dryRun ? lines + previewText(shown.poolPreviews ?? [], shown.nodePreviews ?? []) + hooksText(shown.nodePreviews ?? []) : lines;
}

/** The dry-run preview for people: each pool's rendered diff, then one row per node. */
function previewText(pools: PoolPreview__Output[], nodes: NodePreview__Output[]): string {
  let out = '';
  for (const p of pools) {
    if (p.renderProblems.length) {
      out += `\npool/${p.pool}: would fail to render (nodes keep ${p.current || 'nothing'}): ${p.renderProblems.join('; ')}\n`;
      continue;
    }
    const changes = diffLines(p.diff);
    out += `\npool/${p.pool}: ${p.current === p.rendered ? `stays on ${p.current}` : `${p.current || '(nothing)'} -> ${p.rendered}`}\n`;
    out += changes.length ? changes.map((l) => `  ${l}\n`).join('') : '  no change to the rendered config\n';
    // With more than one batch, when each goes rests on how long a batch lasts: say what was taken.
    if (nodes.some((n) => n.pool === p.pool && n.batch > 1)) {
      out += `  batches: ${p.batchSeconds > 0 ? `about ${formatDuration(p.batchSeconds * 1000)} each (${p.batchBasis})` : p.batchBasis}\n`;
    }
  }
  if (nodes.length === 0) return out;
  const rows = nodes.map((n) => [n.node, n.pool || '<none>', n.action, n.why, n.batch ? String(n.batch) : `- (${n.note})`, n.window]);
  // Staging before the drain (when each node downloads, and when it is disrupted at the earliest)
  // and try mode: columns only when some node stages or tries, so a plain preview reads as before.
  const staging = nodes.some((n) => n.staging && n.staging !== '-');
  const tries = nodes.some((n) => n.try);
  if (staging || tries) {
    const at = (ms: number): string => `${new Date(ms).toISOString().slice(0, 16)}Z`;
    const header = ['NODE', 'POOL', 'ACTION', 'WHY', 'BATCH', 'WINDOW'];
    if (staging) {
      header.push('STAGES', 'DISRUPTED');
      nodes.forEach((n, i) => rows[i]!.push(n.staging || '-', !n.batch ? '-' : `${at(Number(n.startsAtUnixMs))}${n.staging && n.staging !== '-' ? ', once staged' : ''}`));
    }
    if (tries) {
      header.push('TRY');
      nodes.forEach((n, i) => rows[i]!.push(n.try || '-'));
    }
    return out + '\n' + table(header, rows);
  }
  return out + '\n' + table(['NODE', 'POOL', 'ACTION', 'WHY', 'BATCH', 'WINDOW'], rows);
}

/** Lifecycle hooks: a line per node that runs some, under the table (none: nothing is printed). */
function hooksText(nodes: NodePreview__Output[]): string {
  const running = nodes.filter((n) => n.hooks);
  return running.length ? '\nHOOKS\n' + running.map((n) => `${n.node}: ${n.hooks}\n`).join('') : '';
}

function diffLines(d: RenderedDiff__Output | null): string[] {
  if (!d) return [];
  const out: string[] = [];
  for (const f of d.files) out.push(`file ${f.name} ${f.change}`);
  for (const u of d.units) out.push(`unit ${u.name} ${u.change}`);
  if (d.sshKeys) out.push('core SSH keys changed');
  if (d.passwordHash) out.push('core password changed');
  if (d.kernelArgumentsAdded.length) out.push(`kernel arguments added: ${d.kernelArgumentsAdded.join(' ')}`);
  if (d.kernelArgumentsRemoved.length) out.push(`kernel arguments removed: ${d.kernelArgumentsRemoved.join(' ')}`);
  if (d.kernelTypeChanged) out.push(`kernel type -> ${d.kernelType}`);
  if (d.extensionsAdded.length) out.push(`extensions added: ${d.extensionsAdded.join(', ')}`);
  if (d.extensionsRemoved.length) out.push(`extensions removed: ${d.extensionsRemoved.join(', ')}`);
  if (d.osImageUrlChanged) out.push(`OS image -> ${d.osImageUrl || '(default)'}`);
  if (d.fips) out.push('fips changed');
  return out;
}

export async function deleteCommand(c: Clients, resource: string, name: string): Promise<string> {
  // MachineConfiguration/cluster (the cluster-wide disruption policy) can be deleted, not listed.
  const r = /^machineconfigurations?$/i.test(resource) ? 'machineconfiguration' : resourceOf(resource);
  if (r === 'tokens') {
    await call(c, c.identity.deleteBootstrapToken.bind(c.identity), { id: name }, `delete bootstrap token ${name}`);
    return `bootstraptoken/${name} deleted: hosts can no longer fetch a config with it\n`;
  }
  const kind = r === 'machineconfiguration' ? 'MachineConfiguration' : kindOfResource(r);
  if (!kind) throw new ConfigurationError(`cannot delete ${resource}: rendered configs are deleted by the server once no node uses them`);
  await call(c, c.config.delete.bind(c.config), { kind, name }, `delete ${kind}/${name}`);
  return `${kind.toLowerCase()}/${name} deleted\n`;
}

export async function pauseCommand(c: Clients, resource: string, name: string, paused: boolean): Promise<string> {
  if (resourceOf(resource) !== 'pools') throw new ConfigurationError(`only pools can be ${paused ? 'paused' : 'resumed'}`);
  await call(c, c.config.setPoolPaused.bind(c.config), { name, paused }, `${paused ? 'pause' : 'resume'} pool ${name}`);
  return `machineconfigpool/${name} ${paused ? 'paused' : 'resumed'}\n`;
}

/** `mcctl confirm pool|node NAME`: the tries in progress there are confirmed, each node named. */
export async function confirmCommand(c: Clients, resource: string, name: string): Promise<string> {
  const r = resourceOf(resource);
  if (r !== 'pools' && r !== 'nodes') throw new ConfigurationError(`mcctl confirm takes a pool or a node (mcctl confirm pool NAME, mcctl confirm node NAME), not "${resource}"`);
  const kind = r === 'pools' ? 'pool' : 'node';
  const res = await call(c, c.config.confirmTry.bind(c.config), { kind, name }, `confirm ${kind} ${name}`);
  return res.confirmed.map((t) => `node/${t.node}: try of ${t.config} confirmed\n`).join('');
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
