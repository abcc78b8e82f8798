// `mcctl render` and `mcctl validate`: the domain core on local files, no server needed.

import {
  defaultPools,
  InvalidDocumentError,
  parseDocuments,
  renderedConfigManifest,
  renderPool,
  UnknownPoolError,
  type ParsedManifests,
} from '../../machineconfig/index.ts';
import { loadManifestFiles } from '../manifest-files.ts';
import { formatObject, type OutputFormat } from '../output.ts';

/** Loads and validates every document; throws with all problems if any document is invalid. */
export function loadValid(paths: string[]): ParsedManifests & { count: number } {
  const loaded = loadManifestFiles(paths);
  const parsed = parseDocuments(loaded.documents);
  const problems = [...loaded.problems, ...parsed.problems];
  if (problems.length > 0) throw new InvalidDocumentError(problems);
  return { ...parsed, count: loaded.documents.length };
}

export function validateCommand(paths: string[]): string {
  const { configs, pools, machineConfigurations, count } = loadValid(paths);
  const names = [
    ...configs.map((c) => `MachineConfig/${c.metadata.name}`),
    ...pools.map((p) => `MachineConfigPool/${p.metadata.name}`),
    ...machineConfigurations.map((m) => `MachineConfiguration/${m.metadata.name}`),
  ];
  return `${count} document${count === 1 ? '' : 's'} valid: ${names.join(', ')}\n`;
}

export function renderCommand(paths: string[], poolName: string, format: OutputFormat): string {
  const { configs, pools } = loadValid(paths);
  // master and worker exist in every cluster; a pool document given on the command line wins.
  const allPools = new Map(defaultPools().map((p) => [p.metadata.name, p]));
  for (const p of pools) allPools.set(p.metadata.name, p);
  const pool = allPools.get(poolName);
  if (!pool) throw new UnknownPoolError(poolName, [...allPools.keys()]);
  return formatObject(renderedConfigManifest(renderPool(pool, configs)), format);
}
