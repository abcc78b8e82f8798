import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_PINNED_IMAGE_CHARS, MAX_PINNED_IMAGES, pinnedImageProblems } from '../../src/machineconfig/pinned-image-reference.ts';

const DIGEST = `sha256:${'0123456789abcdef'.repeat(4)}`;
const rules = (images: string[]): string[] => pinnedImageProblems('s', images).map((p) => `${p.field} ${p.rule}`);

test('digest references MCO accepts: host with a port, a namespace or none, an IP address', () => {
  assert.deepEqual(rules([
    `quay.io/openshift-release-dev/ocp-v4.0-art-dev@${DIGEST}`,
    `registry.example.com:5000/app@${DIGEST}`,
    `127.0.0.1:5000/pinned/app@${DIGEST}`,
  ]), []);
});

test('a tag, a short or upper-case digest, another algorithm, no host, two namespaces: each refused with its rule and field', () => {
  assert.deepEqual(rules([
    'quay.io/openshift/app:4.19',
    `quay.io/openshift/app:4.19@${DIGEST}x`,
    `quay.io/openshift/app@sha256:${'A'.repeat(64)}`,
    `quay.io/openshift/app@sha512:${'a'.repeat(128)}`,
    `app@${DIGEST}`,
    `quay.io/a/b/c@${DIGEST}`,
  ]), [
    'spec.pinnedImages[0].name pinned-image-digest',
    'spec.pinnedImages[1].name pinned-image-digest',
    'spec.pinnedImages[2].name pinned-image-digest',
    'spec.pinnedImages[3].name pinned-image-digest',
    'spec.pinnedImages[4].name pinned-image-name',
    'spec.pinnedImages[5].name pinned-image-name',
  ]);
  const [tag] = pinnedImageProblems('workload', ['quay.io/openshift/app:4.19']);
  assert.equal(tag!.object, 'PinnedImageSet/workload');
  assert.match(tag!.message, /^quay\.io\/openshift\/app:4\.19 is not a digest reference/);
});

test('MCO\'s limits: 1 to 447 characters, 1 to 500 images, each name once', () => {
  const long = `quay.io/${'a'.repeat(MAX_PINNED_IMAGE_CHARS)}@${DIGEST}`;
  assert.deepEqual(rules([long]), ['spec.pinnedImages[0].name pinned-image-length']);
  assert.deepEqual(rules([]), ['spec.pinnedImages pinned-images-min-items']);
  const many = Array.from({ length: MAX_PINNED_IMAGES + 1 }, (_, i) => `quay.io/app${i}@${DIGEST}`);
  assert.deepEqual(rules(many), ['spec.pinnedImages pinned-images-max-items']);
  assert.deepEqual(rules(many.slice(0, MAX_PINNED_IMAGES)), []);
  const one = `quay.io/app@${DIGEST}`;
  assert.deepEqual(rules([one, one]), ['spec.pinnedImages[1].name pinned-image-unique']);
});
