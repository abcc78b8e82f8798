// The MachineConfigs the higher-level configs (KubeletConfig, ContainerRuntimeConfig, Image and
// the mirror sets) generate, given the cache, and the writes that would make the stored ones so:
// one answer for the leader's generated-config controller, which writes them, for Apply and
// Delete, which wait for the pools they change, for the dry-run preview, which renders them, and
// for ListSourceObjects, which shows their statuses.

import { canonicalJson, type MachineConfig } from '../../machineconfig/index.ts';
import { desiredGeneratedConfigs, isGeneratedConfig, sourcesInput, type GeneratedConfigs, type SourceObject } from '../../machineconfig/generated-configs.ts';
import type { StoredObject, WriteOp } from '../store/store.ts';
import type { ClusterCache } from './cluster-cache.ts';

/**
 * What the generator wants given the cache, with `override` standing in for stored sources (an
 * Apply's) and without `removed` ("Kind/name", a Delete's).
 */
export function generatedConfigsFor(cache: ClusterCache, override: readonly SourceObject[] = [], removed?: string): GeneratedConfigs {
  const replaced = new Set(override.map((o) => `${o.kind}/${o.metadata.name}`));
  if (removed) replaced.add(removed);
  const now = Date.now();
  const sources: { value: SourceObject; createdAt: number }[] = [
    ...cache.sources.filter((s) => !replaced.has(`${s.value.kind}/${s.value.metadata.name}`)),
    ...override.map((value) => ({ value, createdAt: cache.sourcesOf(value.kind).get(value.metadata.name)?.createdAt ?? now })),
  ];
  return desiredGeneratedConfigs({
    pools: [...cache.pools.values()].map((p) => p.value),
    configs: [...cache.configs.values()].map((c) => c.value),
    ...sourcesInput(sources),
  });
}

/** The writes that make the stored generated configs `desired`, and the configs they change (old and new). */
export function generatedConfigWrites(cache: ClusterCache, desired: readonly MachineConfig[]): { ops: WriteOp[]; changed: MachineConfig[] } {
  const ops: WriteOp[] = [];
  const changed: MachineConfig[] = [];
  const wanted = new Set(desired.map((mc) => mc.metadata.name));
  for (const mc of desired) {
    const existing: StoredObject<MachineConfig> | undefined = cache.configs.get(mc.metadata.name);
    if (existing && canonicalJson(existing.value) === canonicalJson(mc)) continue;
    ops.push({ type: 'put', kind: 'MachineConfig', name: mc.metadata.name, value: mc, expectedVersion: existing?.resourceVersion ?? null, ...(existing ? { createdAt: existing.createdAt } : {}) });
    changed.push(mc, ...(existing ? [existing.value] : []));
  }
  for (const existing of cache.configs.values()) {
    if (!isGeneratedConfig(existing.value) || wanted.has(existing.name)) continue;
    ops.push({ type: 'delete', kind: 'MachineConfig', name: existing.name, expectedVersion: existing.resourceVersion });
    changed.push(existing.value);
  }
  return { ops, changed };
}
