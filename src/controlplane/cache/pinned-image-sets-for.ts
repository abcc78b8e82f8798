// The PinnedImageSets a pool's nodes pull and pin, as their assignments carry them: the sets the
// pool's spec.pinnedImageSets names that exist, in the pool's order. They come from the cache as
// it stands on the replica holding the stream, like the rendered config the assignment names:
// every replica's cache follows the same store, so each sends the same sets.

import type { AssignedPinnedImageSet } from '../../runtime/generated/mcplane/v1/AssignedPinnedImageSet.ts';
import type { PinnedImageSet } from '../../machineconfig/pinned-image-set.ts';
import type { ClusterCache } from './cluster-cache.ts';

export function pinnedImageSetsFor(cache: ClusterCache, pool: string): AssignedPinnedImageSet[] {
  const refs = cache.pools.get(pool)?.value.spec.pinnedImageSets ?? [];
  const sets = cache.sourcesOf('PinnedImageSet');
  return refs.flatMap((ref) => {
    const stored = sets.get(ref.name);
    if (!stored) return [];
    // A set's generation is the revision that last wrote it: it rises with every change.
    return [{ name: ref.name, generation: Number(stored.resourceVersion), images: (stored.value as PinnedImageSet).spec.pinnedImages.map((i) => i.name) }];
  });
}
