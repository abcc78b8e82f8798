// Renders each pool whose inputs changed (its spec, or a config it selects) and points the pool
// at the result: the rendered config is written first, then the pool's target, each write safe
// to repeat. A failed render leaves the pool on its last good config and keeps the problems for
// RenderDegraded. Rendered configs are garbage-collected, but never one a node's current or
// desired config names: MCO strands nodes when it deletes those.

import { configsForPool, RenderError, renderPool, sha256Hex } from '../machineconfig/index.ts';
import type { Logger } from '../runtime/logger.ts';
import type { CacheChange, ClusterCache } from './cluster-cache.ts';
import type { Controller } from './controller.ts';
import type { LeaderWriter } from './leader-writer.ts';
import { poolStatusFor } from './pool-status-controller.ts';
import type { WriteOp } from './store/store.ts';
import type { PoolStatusRecord, StoredRendered } from './stored-records.ts';

/** Rendered configs kept per pool beyond the referenced ones, newest first. */
export const RENDERED_HISTORY = 5;

export class RenderController implements Controller {
  readonly name = 'render';
  readonly leaderOnly = true;

  constructor(private readonly cache: ClusterCache, private readonly writer: LeaderWriter, private readonly log: Logger) {}

  interestedIn(change: CacheChange): boolean {
    return change.changed.has('MachineConfig') || change.changed.has('MachineConfigPool');
  }

  async reconcile(): Promise<void> {
    const configs = [...this.cache.configs.values()];
    const configValues = configs.map((o) => o.value);
    const versions = new Map(configs.map((o) => [o.name, o.resourceVersion]));
    for (const [name, stored] of this.cache.pools) {
      const pool = stored.value;
      const selected = configsForPool(pool, configValues);
      const inputs = sha256Hex(JSON.stringify([stored.resourceVersion, selected.map((mc) => [mc.metadata.name, versions.get(mc.metadata.name)])]));
      const current = this.cache.poolStatuses.get(name);
      if (current?.value.renderedInputs === inputs) continue;
      const previous: PoolStatusRecord = current?.value ?? { target: '', targetSources: [], renderProblems: [], renderedInputs: '', renderedRevision: 0 };
      const revision = this.cache.revision;
      let next: PoolStatusRecord;
      try {
        const rendered = renderPool(pool, configValues);
        if (!this.cache.rendered.has(rendered.name)) {
          const { specJson: _json, ...value } = rendered;
          await this.writer.commit([{ type: 'put', kind: 'RenderedConfig', name: rendered.name, value: value satisfies StoredRendered }]);
        }
        if (previous.target !== rendered.name) {
          this.log.info({ pool: name, from: previous.target || undefined, to: rendered.name, sources: rendered.sources.length }, 'pool target changed');
        }
        next = { ...previous, target: rendered.name, targetSources: rendered.sources, renderProblems: [], renderedInputs: inputs, renderedRevision: revision };
      } catch (err) {
        if (!(err instanceof RenderError)) throw err;
        if (previous.renderProblems.length === 0) this.log.warn({ pool: name, problems: err.problems }, 'render failed; the pool keeps its last good config');
        next = { ...previous, renderProblems: err.problems, renderedInputs: inputs, renderedRevision: revision };
      }
      // The status goes with the new target, so a reader never sees a target without its counts.
      const status = poolStatusFor(this.cache, name, next);
      if (status) next.status = status;
      await this.writer.commit([{
        type: 'put', kind: 'PoolStatus', name, value: next,
        expectedVersion: current?.resourceVersion ?? null, ...(current ? { createdAt: current.createdAt } : {}),
      }]);
    }
    const orphans: WriteOp[] = [...this.cache.poolStatuses.values()]
      .filter((s) => !this.cache.pools.has(s.name))
      .map((s) => ({ type: 'delete', kind: 'PoolStatus', name: s.name, expectedVersion: s.resourceVersion }));
    await this.writer.commitEach(orphans);
    await this.collectGarbage();
  }

  async collectGarbage(): Promise<void> {
    const keep = new Set(referencedConfigs(this.cache).keys());
    const byPool = new Map<string, { name: string; createdAt: number }[]>();
    for (const o of this.cache.rendered.values()) {
      byPool.set(o.value.pool, [...(byPool.get(o.value.pool) ?? []), { name: o.name, createdAt: o.createdAt }]);
    }
    for (const list of byPool.values()) {
      list.sort((a, b) => b.createdAt - a.createdAt || (a.name < b.name ? 1 : -1));
      for (const r of list.slice(0, RENDERED_HISTORY)) keep.add(r.name);
    }
    const ops: WriteOp[] = [...this.cache.rendered.values()]
      .filter((o) => !keep.has(o.name))
      .map((o) => ({ type: 'delete', kind: 'RenderedConfig', name: o.name, expectedVersion: o.resourceVersion }));
    if (ops.length) {
      this.log.info({ deleted: ops.map((o) => o.name) }, 'deleted unreferenced rendered configs');
      await this.writer.commitEach(ops);
    }
  }
}

/** Names of the rendered configs that must be kept, with who needs each (`describe`, GC). */
export function referencedConfigs(cache: ClusterCache): Map<string, string[]> {
  const refs = new Map<string, string[]>();
  const add = (name: string, by: string): void => {
    if (!name) return;
    const list = refs.get(name);
    if (!list) refs.set(name, [by]);
    else if (list.at(-1) !== by) list.push(by);
  };
  for (const node of cache.nodes.values()) {
    add(node.desiredConfig, `node/${node.name}`);
    add(node.status.currentConfig, `node/${node.name}`);
    add(node.status.desiredConfig, `node/${node.name}`);
  }
  for (const [name, status] of cache.poolStatuses) add(status.value.target, `pool/${name}`);
  return refs;
}
