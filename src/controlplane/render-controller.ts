// Renders every pool from the stored MachineConfigs. A failed render leaves the pool on its last
// good config and keeps the problems for the RenderDegraded condition. Rendered configs are
// garbage-collected, but never one a node's current or desired config names: MCO strands nodes
// when it deletes those.

import { RenderError, renderPool, type Problem } from '../machineconfig/index.ts';
import type { ClusterState, PoolRecord, StoredRendered } from './cluster-state.ts';
import type { Logger } from '../runtime/logger.ts';
import type { WriteOp } from './store/store.ts';

/** Rendered configs kept per pool beyond the referenced ones, newest first. */
export const RENDERED_HISTORY = 5;

export class RenderController {
  /** The latest render problems per pool; absent when the pool rendered. */
  readonly problems = new Map<string, Problem[]>();

  constructor(private readonly state: ClusterState, private readonly log: Logger) {}

  async reconcile(): Promise<void> {
    const configs = [...this.state.configs.values()].map((o) => o.value);
    const ops: WriteOp[] = [];
    for (const [name, stored] of this.state.pools) {
      let rendered;
      try {
        rendered = renderPool(stored.value.pool, configs);
      } catch (err) {
        if (!(err instanceof RenderError)) throw err;
        if (!this.problems.has(name)) this.log.warn({ pool: name, problems: err.problems }, 'render failed; the pool keeps its last good config');
        this.problems.set(name, err.problems);
        continue;
      }
      this.problems.delete(name);
      if (!this.state.rendered.has(rendered.name)) {
        const { specJson: _json, ...value } = rendered;
        ops.push({ type: 'put', kind: 'RenderedConfig', name: rendered.name, value: value satisfies StoredRendered });
      }
      if (stored.value.target !== rendered.name) {
        this.log.info({ pool: name, from: stored.value.target || undefined, to: rendered.name, sources: rendered.sources.length }, 'pool target changed');
        const value: PoolRecord = { ...stored.value, target: rendered.name, targetSources: rendered.sources };
        ops.push({ type: 'put', kind: 'MachineConfigPool', name, value, expectedVersion: stored.resourceVersion });
      }
    }
    for (const name of this.problems.keys()) if (!this.state.pools.has(name)) this.problems.delete(name);
    await this.state.commit(ops);
    await this.collectGarbage();
  }

  /** Names of the rendered configs that must be kept, with why, for tests and `describe`. */
  referencedConfigs(): Map<string, string[]> {
    const refs = new Map<string, string[]>();
    const add = (name: string, by: string): void => {
      if (name) refs.set(name, [...(refs.get(name) ?? []), by]);
    };
    for (const node of this.state.nodes.values()) {
      add(node.desiredConfig, `node/${node.name}`);
      add(node.status.currentConfig, `node/${node.name}`);
      add(node.status.desiredConfig, `node/${node.name}`);
    }
    for (const [name, pool] of this.state.pools) add(pool.value.target, `pool/${name}`);
    return refs;
  }

  async collectGarbage(): Promise<void> {
    const keep = new Set(this.referencedConfigs().keys());
    const byPool = new Map<string, { name: string; createdAt: number }[]>();
    for (const o of this.state.rendered.values()) {
      byPool.set(o.value.pool, [...(byPool.get(o.value.pool) ?? []), { name: o.name, createdAt: o.createdAt }]);
    }
    for (const list of byPool.values()) {
      list.sort((a, b) => b.createdAt - a.createdAt || (a.name < b.name ? 1 : -1));
      for (const r of list.slice(0, RENDERED_HISTORY)) keep.add(r.name);
    }
    const ops: WriteOp[] = [...this.state.rendered.keys()]
      .filter((name) => !keep.has(name))
      .map((name) => ({ type: 'delete', kind: 'RenderedConfig', name }));
    if (ops.length) {
      this.log.info({ deleted: ops.map((o) => o.name) }, 'deleted unreferenced rendered configs');
      await this.state.commit(ops);
    }
  }
}
