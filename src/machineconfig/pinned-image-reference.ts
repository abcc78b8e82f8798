// The rules MCO's API sets on a PinnedImageSet's images (openshift/api machineconfiguration/v1:
// ImageDigestFormat and PinnedImageSetSpec), as Problems: an image is pinned by digest only,
// because a tag can move to other bytes after the node pulled it and the pin would then hold the
// wrong image. The agent's puller checks them before asking the runtime for anything; the kind's
// parser can use the same function when the kind lands.

import type { Problem } from './errors.ts';

/** ImageDigestFormat's MaxLength. */
export const MAX_PINNED_IMAGE_CHARS = 447;
/** PinnedImageSetSpec.pinnedImages' MaxItems. */
export const MAX_PINNED_IMAGES = 500;

// The two CEL rules of ImageDigestFormat, anchored as they are there. `[a-zA-Z0-9-_]` in RE2 is
// the same set as `[a-zA-Z0-9_-]` here.
const DIGEST = /^sha256:[a-f0-9]{64}$/;
const NAME = /^([a-zA-Z0-9-]+\.)+[a-zA-Z0-9-]+(:[0-9]{2,5})?\/([a-zA-Z0-9_-]{0,61}\/)?[a-zA-Z0-9_.-]*?$/;

/** Problems with one set's image list; empty when every image is a digest reference MCO accepts. */
export function pinnedImageProblems(set: string, images: readonly string[]): Problem[] {
  const object = `PinnedImageSet/${set}`;
  const problems: Problem[] = [];
  if (images.length === 0) problems.push({ object, field: 'spec.pinnedImages', rule: 'pinned-images-min-items', message: 'must list at least one image' });
  if (images.length > MAX_PINNED_IMAGES) problems.push({ object, field: 'spec.pinnedImages', rule: 'pinned-images-max-items', message: `lists ${images.length} images; at most ${MAX_PINNED_IMAGES} are allowed` });
  const seen = new Set<string>();
  images.forEach((image, i) => {
    const field = `spec.pinnedImages[${i}].name`;
    const problem = imageProblem(image);
    if (problem) problems.push({ object, field, ...problem });
    else if (seen.has(image)) problems.push({ object, field, rule: 'pinned-image-unique', message: `${image} is listed twice (pinnedImages is a map keyed by name)` });
    seen.add(image);
  });
  return problems;
}

function imageProblem(image: string): { rule: string; message: string } | undefined {
  if (image.length === 0 || image.length > MAX_PINNED_IMAGE_CHARS) {
    return { rule: 'pinned-image-length', message: `${JSON.stringify(image.slice(0, 80))} is ${image.length} characters; an image reference must have 1 to ${MAX_PINNED_IMAGE_CHARS}` };
  }
  const parts = image.split('@');
  if (parts.length !== 2 || !DIGEST.test(parts[1]!)) {
    return {
      rule: 'pinned-image-digest',
      message: `${image} is not a digest reference: a pinned image must end with @sha256:<64 lowercase hex digits> (a tag can later name other bytes, so it cannot be pinned)`,
    };
  }
  if (!NAME.test(parts[0]!)) {
    return { rule: 'pinned-image-name', message: `${image}: the name before @ must be host[:port][/namespace]/name, like a URL without its scheme` };
  }
  return undefined;
}
