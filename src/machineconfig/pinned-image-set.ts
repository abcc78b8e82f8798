// PinnedImageSet (machineconfiguration.openshift.io/v1, openshift/api
// machineconfiguration/v1/types_pinnedimageset.go): the images a pool's nodes pull ahead of time
// and pin in CRI-O, and the pool's reference to it (MachineConfigPoolSpec.pinnedImageSets,
// PinnedImageSetRef). Validated with the CRD's rules: metadata, `spec.pinnedImages[].name` only,
// 1 to 500 digest references of 1 to 447 characters, each once (pinned-image-reference.ts).
// Nothing is generated from a set: the control plane stores it and sends the sets of a node's pool
// with its assignment; the agent pulls and pins them (src/agent/pinned-image-sets.ts).

import { API_VERSION } from './constants.ts';
import { checkApi } from './image-config.ts';
import { parseObjectMeta } from './object-meta.ts';
import { pinnedImageProblems } from './pinned-image-reference.ts';
import { isRecord, type ProblemCollector } from './problem-collector.ts';
import type { ObjectMeta } from './types.ts';

export const KIND_PINNED_IMAGE_SET = 'PinnedImageSet';

export interface PinnedImageSet {
  apiVersion: typeof API_VERSION;
  kind: typeof KIND_PINNED_IMAGE_SET;
  metadata: ObjectMeta;
  spec: { pinnedImages: { name: string }[] };
}

/** MachineConfigPoolSpec.pinnedImageSets' MaxItems. */
export const MAX_POOL_PINNED_IMAGE_SETS = 100;
// PinnedImageSetRef.name's Pattern: DNS labels of letters (either case), digits and "-", joined by ".".
const SET_NAME = /^([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]{0,61}[a-zA-Z0-9])(\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]{0,61}[a-zA-Z0-9]))*$/;

/** Validates a PinnedImageSet; every problem goes into `c`. `status` (MCO's conditions) is accepted and dropped. */
export function parsePinnedImageSet(doc: Record<string, unknown>, c: ProblemCollector): PinnedImageSet | undefined {
  checkApi(doc, c, API_VERSION);
  const metadata = parseObjectMeta(doc.metadata, c);
  if (doc.spec === undefined || doc.spec === null) {
    c.add('spec', 'required', 'spec with pinnedImages is required');
    return undefined;
  }
  const spec = c.record(doc.spec, 'spec');
  if (!spec) return undefined;
  c.onlyKeys(spec, 'spec', ['pinnedImages']);
  if (spec.pinnedImages === undefined || spec.pinnedImages === null) {
    c.add('spec.pinnedImages', 'required', 'pinnedImages is required: 1 to 500 images by digest, each {name: host[:port][/namespace]/name@sha256:<digest>}');
    return undefined;
  }
  const raw = c.array(spec.pinnedImages, 'spec', 'pinnedImages');
  if (!raw) return undefined;
  const names: string[] = [];
  let shapeOk = true;
  raw.forEach((entry, i) => {
    const field = `spec.pinnedImages[${i}]`;
    if (!isRecord(entry)) {
      shapeOk = false;
      c.add(field, 'type', 'must be an object {name: <image by digest>}');
      return;
    }
    c.onlyKeys(entry, field, ['name']);
    const name = c.string(entry.name, field, 'name');
    if (name === undefined) {
      if (entry.name === undefined || entry.name === null) c.add(`${field}.name`, 'required', 'name is required: an image by digest');
      shapeOk = false;
      return;
    }
    names.push(name);
  });
  // The image rules (digest, name, length, count, unique) as the agent checks them too.
  if (shapeOk) for (const p of pinnedImageProblems(metadata?.name ?? '<unnamed>', names)) c.add(p.field, p.rule, p.message);
  if (!metadata || !c.ok) return undefined;
  return { apiVersion: API_VERSION, kind: KIND_PINNED_IMAGE_SET, metadata, spec: { pinnedImages: names.map((name) => ({ name })) } };
}

/** MachineConfigPoolSpec.pinnedImageSets: `[{name: <set>}]`, at most 100, each name once (a list map keyed by name). */
export function parsePoolPinnedImageSets(raw: unknown, c: ProblemCollector, field = 'spec.pinnedImageSets'): { name: string }[] | undefined {
  const list = c.array(raw, field);
  if (!list) return undefined;
  if (list.length > MAX_POOL_PINNED_IMAGE_SETS) c.add(field, 'pinned-image-sets-max-items', `lists ${list.length} sets; at most ${MAX_POOL_PINNED_IMAGE_SETS} are allowed`);
  const out: { name: string }[] = [];
  list.forEach((entry, i) => {
    const at = `${field}[${i}]`;
    if (!isRecord(entry)) return void c.add(at, 'type', 'must be an object {name: <PinnedImageSet name>}');
    c.onlyKeys(entry, at, ['name']);
    const name = c.string(entry.name, at, 'name');
    if (name === undefined) {
      if (entry.name === undefined || entry.name === null) c.add(`${at}.name`, 'required', 'name is required: the name of a PinnedImageSet');
      return;
    }
    if (name.length < 1 || name.length > 253 || !SET_NAME.test(name)) {
      return void c.add(`${at}.name`, 'pinned-image-set-name', `${JSON.stringify(name.slice(0, 100))} is not a PinnedImageSet name: 1 to 253 characters, DNS labels of letters, digits and "-" joined by "."`);
    }
    if (out.some((s) => s.name === name)) return void c.add(`${at}.name`, 'duplicate-entry', `${name} is listed twice (pinnedImageSets is a map keyed by name)`);
    out.push({ name });
  });
  return out;
}

/**
 * A warning, not an error, for each pool of an Apply that names a PinnedImageSet neither stored
 * nor in the same Apply: Kubernetes keeps no references, so MCO accepts such a pool, and a pool
 * and its set may come in either order (two `apply -f`, an import). Until the set exists the
 * pool's nodes pin nothing for it.
 */
export function missingPinnedImageSetWarnings(pools: readonly { metadata: { name: string }; spec: { pinnedImageSets?: { name: string }[] } }[], knownSets: ReadonlySet<string>): string[] {
  return pools.flatMap((pool) => (pool.spec.pinnedImageSets ?? []).flatMap((ref, i) => knownSets.has(ref.name) ? [] : [
    `MachineConfigPool/${pool.metadata.name}: spec.pinnedImageSets[${i}].name: PinnedImageSet/${ref.name} does not exist; the pool's nodes pin nothing for it until it is applied`,
  ]));
}
