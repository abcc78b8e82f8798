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
import { desiredGeneratedConfigs, sourcesInput } from '../../machineconfig/generated-configs.ts';
import { GenerateConfigError } from '../../machineconfig/errors.ts';
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
  const { configs, pools, machineConfigurations, sources, count } = loadValid(paths);
  const names = [
    ...configs.map((c) => `MachineConfig/${c.metadata.name}`),
    ...pools.map((p) => `MachineConfigPool/${p.metadata.name}`),
    ...machineConfigurations.map((m) => `MachineConfiguration/${m.metadata.name}`),
    ...sources.map((o) => `${o.kind}/${o.metadata.name}`),
  ];
  return `${count} document${count === 1 ? '' : 's'} valid: ${names.join(', ')}\n`;
}

export function renderCommand(paths: string[], poolName: string, format: OutputFormat): string {
  const { configs, pools, sources } = loadValid(paths);
  // master and worker exist in every cluster; a pool document given on the command line wins.
  const allPools = new Map(defaultPools().map((p) => [p.metadata.name, p]));
  for (const p of pools) allPools.set(p.metadata.name, p);
  const pool = allPools.get(poolName);
  if (!pool) throw new UnknownPoolError(poolName, [...allPools.keys()]);
  // KubeletConfigs, ContainerRuntimeConfigs and the registries sources render as the
  // MachineConfigs the control plane would generate from them (files in the given order).
  // Only this pool's (and, for a custom pool, worker's, whose configs it takes) are generated, so
  // a problem with another pool's does not stop this render; whether a source selects any pool
  // at all is asked of every pool known here, so one that selects only another pool is no problem.
  const generatedFor = [pool, ...(poolName !== 'worker' && poolName !== 'master' && allPools.has('worker') ? [allPools.get('worker')!] : [])];
  const generated = desiredGeneratedConfigs({ pools: generatedFor, knownPools: [...allPools.values()], configs, ...sourcesInput(sources.map((value, i) => ({ value, createdAt: i }))) });
  const problems = generated.statuses.flatMap((s) => s.problems);
  if (problems.length > 0) throw new GenerateConfigError(problems);
  return formatObject(renderedConfigManifest(renderPool(pool, [...configs, ...generated.configs])), format);
}
