// Which rendered configs something still needs, and who: the render controller's garbage
// collection keeps them, and `mcctl describe` / listRenderedConfigs say why each is kept. MCO
// deletes rendered configs that nodes still name and strands those nodes; mcplane asks this first.

import type { ClusterCache } from './cluster-cache.ts';

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
  // spec.rollout: what a pool may roll back to, and what it rolled back to, must survive the GC.
  for (const [name, status] of cache.poolStatuses) {
    add(status.value.rollout?.stableConfig ?? '', `pool/${name} (rollback)`);
    add(status.value.rollout?.halt?.rollbackTo ?? '', `pool/${name} (rollback)`);
  }
  return refs;
}
