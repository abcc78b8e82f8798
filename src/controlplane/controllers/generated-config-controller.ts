// Keeps the MachineConfigs generated from the higher-level configs (KubeletConfig,
// ContainerRuntimeConfig, Image/cluster and the image mirror sets) as
// desiredGeneratedConfigs says they should be: creates and updates them, and deletes those whose
// source is gone (MCO's ownerReferences and finalizers, in one place). The render controller then
// renders them into their pools like any other config. Statuses are not stored: they are the same
// pure function of the cache, computed when read (generated-config-plan.ts, which Apply and
// Delete read too).

import type { Logger } from '../../runtime/logger.ts';
import { SOURCE_STORED_KINDS, type CacheChange, type ClusterCache } from '../cache/cluster-cache.ts';
import { generatedConfigsFor, generatedConfigWrites } from '../cache/generated-config-plan.ts';
import type { Controller } from './controller.ts';
import type { LeaderWriter } from '../replica/leader-writer.ts';

export class GeneratedConfigController implements Controller {
  readonly name = 'generated-configs';
  readonly leaderOnly = true;

  private readonly cache: ClusterCache;
  private readonly writer: LeaderWriter;
  private readonly log: Logger;
  constructor(cache: ClusterCache, writer: LeaderWriter, log: Logger) {
    this.cache = cache;
    this.writer = writer;
    this.log = log;
  }

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
