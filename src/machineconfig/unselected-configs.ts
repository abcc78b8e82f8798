// MachineConfigs that no pool selects: accepted (a pool selecting them may come later, as in
// MCO), but they reach no node, which is rarely what the author meant (a role label typo such
// as "wroker" is the usual cause). Apply answers with a warning for each.

import { readDocuments, parseDocuments } from './manifest.ts';
import { formatSelector } from './label-selector.ts';
import { configsForPool, selfReportedSelectorWarnings } from './pool-membership.ts';
import type { MachineConfig, MachineConfigPool } from './types.ts';

/** The configs of `configs` that no pool's machineConfigSelector selects. */
export function unselectedConfigs(configs: readonly MachineConfig[], pools: readonly MachineConfigPool[]): MachineConfig[] {
  // configsForPool gives each pool's merge set, custom pools included; a custom pool also merges
  // the worker configs, which the worker pool's selector already covers.
  const selected = new Set(pools.flatMap((p) => configsForPool(p, configs).map((mc) => mc.metadata.name)));
  return configs.filter((mc) => !selected.has(mc.metadata.name));
}

/**
 * Warnings for an apply request: its MachineConfigs that no pool would select once it is stored,
 * counting the pools in the same request (they replace stored ones of the same name), and its
 * pools that select on labels a host could set for itself.
 */
export function unselectedConfigWarnings(manifests: readonly { source: string; text: string }[], storedPools: readonly MachineConfigPool[]): string[] {
  const parsed = parseDocuments(manifests.flatMap(({ source, text }) => readDocuments(text, source).documents));
  // The request's own pools: a selector only a host's report could satisfy reaches nobody.
  return [...unselected(parsed, storedPools), ...selfReportedSelectorWarnings(parsed.pools)];
}

function unselected(parsed: ReturnType<typeof parseDocuments>, storedPools: readonly MachineConfigPool[]): string[] {
  const pools = new Map(storedPools.map((p) => [p.metadata.name, p]));
  for (const p of parsed.pools) pools.set(p.metadata.name, p);
  const selectors = [...pools.values()].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1))
    .map((p) => `${p.metadata.name} (${formatSelector(p.spec.machineConfigSelector)})`).join(', ');
  return unselectedConfigs(parsed.configs, [...pools.values()]).map((mc) => {
    const labels = Object.entries(mc.metadata.labels ?? {}).map(([k, v]) => (v ? `${k}=${v}` : k)).join(',') || '<none>';
    return `MachineConfig/${mc.metadata.name} is selected by no pool, so it reaches no node (its labels: ${labels}; pools select: ${selectors})`;
  });
}
