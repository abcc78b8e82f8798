// Computes every pool's status after each reconcile and remembers it, so conditions keep their
// transition times and Watch sends a pool only when something about it changed.

import { computePoolStatus, type PoolStatus } from '../machineconfig/index.ts';
import type { ClusterState } from './cluster-state.ts';
import type { RenderController } from './render-controller.ts';

export class PoolStatusTracker {
  readonly #statuses = new Map<string, PoolStatus>();
  readonly #fingerprints = new Map<string, string>();

  constructor(private readonly state: ClusterState, private readonly render: RenderController) {}

  status(pool: string): PoolStatus | undefined {
    return this.#statuses.get(pool);
  }

  /** Recomputes every pool; returns the names whose status changed. */
  refresh(now = Date.now()): string[] {
    const changed: string[] = [];
    for (const [name, stored] of this.state.pools) {
      const previous = this.#statuses.get(name);
      const status = computePoolStatus({
        pool: stored.value.pool,
        target: stored.value.target,
        targetSources: stored.value.targetSources,
        nodes: this.state.nodesInPool(name),
        renderProblems: this.render.problems.get(name),
        previous: previous?.conditions,
        now,
      });
      this.#statuses.set(name, status);
      const fingerprint = JSON.stringify([status, stored.resourceVersion]);
      if (this.#fingerprints.get(name) !== fingerprint) {
        this.#fingerprints.set(name, fingerprint);
        changed.push(name);
      }
    }
    for (const name of [...this.#statuses.keys()]) {
      if (!this.state.pools.has(name)) {
        this.#statuses.delete(name);
        this.#fingerprints.delete(name);
      }
    }
    return changed;
  }
}
