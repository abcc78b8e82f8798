// MachineConfigs that no pool selects: accepted (a pool selecting them may come later, as in
// MCO), but they reach no node, which is rarely what the author meant (a role label typo such
// as "wroker" is the usual cause). Apply answers with a warning for each.

import type { ParsedManifests } from './manifest.ts';
import { formatSelector } from './label-selector.ts';
import { configsForPool } from './pool-membership.ts';
import type { MachineConfig, MachineConfigPool } from './types.ts';

/** The configs of `configs` that no pool's machineConfigSelector selects. */
export function unselectedConfigs(configs: readonly MachineConfig[], pools: readonly MachineConfigPool[]): MachineConfig[] {
  // configsForPool gives each pool's merge set, custom pools included; a custom pool also merges
  // the worker configs, which the worker pool's selector already covers.
  const selected = new Set(pools.flatMap((p) => configsForPool(p, configs).map((mc) => mc.metadata.name)));
  return configs.filter((mc) => !selected.has(mc.metadata.name));
}

/**
 * A warning for each MachineConfig of `parsed` that no pool would select once it is stored,
 * counting the pools in the same request (they replace stored ones of the same name).
 */
export function unselectedConfigWarnings(parsed: Pick<ParsedManifests, 'configs' | 'pools'>, storedPools: readonly MachineConfigPool[]): string[] {
  const pools = new Map(storedPools.map((p) => [p.metadata.name, p]));
  for (const p of parsed.pools) pools.set(p.metadata.name, p);
  const selectors = [...pools.values()].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1))
    .map((p) => `${p.metadata.name} (${formatSelector(p.spec.machineConfigSelector)})`).join(', ');
  return unselectedConfigs(parsed.configs, [...pools.values()]).map((mc) => {
    const labels = Object.entries(mc.metadata.labels ?? {}).map(([k, v]) => (v ? `${k}=${v}` : k)).join(',') || '<none>';
    return `MachineConfig/${mc.metadata.name} is selected by no pool, so it reaches no node (its labels: ${labels}; pools select: ${selectors})`;
  });
}
