// Keeps the MachineConfigs generated from the higher-level configs (KubeletConfig,
// ContainerRuntimeConfig, Image/cluster and the image mirror sets) as
// desiredGeneratedConfigs says they should be: creates and updates them, and deletes those whose
// source is gone (MCO's ownerReferences and finalizers, in one place). The render controller then
// renders them into their pools like any other config. Statuses are not stored: they are the same
// pure function of the cache, computed when read (generatedConfigStatuses).

import { canonicalJson, type MachineConfig } from '../../machineconfig/index.ts';
import { desiredGeneratedConfigs, isGeneratedConfig, sourcesInput, type GeneratedConfigs, type SourceObject } from '../../machineconfig/generated-configs.ts';
import type { Logger } from '../../runtime/logger.ts';
import { SOURCE_STORED_KINDS, type CacheChange, type ClusterCache } from '../cache/cluster-cache.ts';
import type { Controller } from './controller.ts';
import type { LeaderWriter } from '../replica/leader-writer.ts';
import type { StoredObject, WriteOp } from '../store/store.ts';

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

export class GeneratedConfigController implements Controller {
  readonly name = 'generated-configs';
  readonly leaderOnly = true;

  constructor(private readonly cache: ClusterCache, private readonly writer: LeaderWriter, private readonly log: Logger) {}

  interestedIn(change: CacheChange): boolean {
    return change.changed.has('MachineConfig') || change.changed.has('MachineConfigPool') || SOURCE_STORED_KINDS.some((k) => change.changed.has(k));
  }

  async reconcile(signal?: AbortSignal): Promise<void> {
    const { configs, statuses } = generatedConfigsFor(this.cache);
    const { ops } = generatedConfigWrites(this.cache, configs);
    if (ops.length === 0) return;
    // One commit: a KubeletConfig that moves to another pool swaps its configs at once.
    await this.writer.commit(ops, signal);
    this.log.info({ written: ops.map((o) => `${o.type} ${o.name}`), failed: statuses.filter((s) => s.problems.length).map((s) => s.object) }, 'generated configs updated');
  }
}
