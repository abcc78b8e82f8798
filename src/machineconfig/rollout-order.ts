// The order a pool's nodes take a new config in: zone by zone, oldest first. The rollout, its
// canaries and the preview all walk the nodes in it.

import { ZONE_LABEL } from './constants.ts';
import type { NodeRecord } from './types.ts';

export function rolloutOrder(a: NodeRecord, b: NodeRecord): number {
  const za = a.labels[ZONE_LABEL] ?? '';
  const zb = b.labels[ZONE_LABEL] ?? '';
  if (za !== zb) return za < zb ? -1 : 1;
  if (a.registeredAt !== b.registeredAt) return a.registeredAt - b.registeredAt;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}
