// PinnedImageSet through mcctl against a real server, run as a separate process: apply (with a
// pool that names the set), validate (MCO's CRD rules, openshift/api machineconfiguration/v1
// types_pinnedimageset.go, each refusal naming the object, the field and the rule), get (table,
// -o wide, -o yaml), the warning for a pool naming a set that does not exist, delete.

import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { runCliAsync } from '../helpers/run-cli.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

const { conn } = serverFixture();
const dir = mkdtempSync(join(tmpdir(), 'mcplane-pis-'));
const mcctl = (...args: string[]) => runCliAsync([...conn, ...args]);
const file = (name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

const A = `quay.io/example/app@sha256:${'a'.repeat(64)}`;
const B = `registry.example.com:5000/team/sidecar@sha256:${'b'.repeat(64)}`;
const SET = `apiVersion: machineconfiguration.openshift.io/v1
kind: PinnedImageSet
metadata: {name: workload-images, labels: {machineconfiguration.openshift.io/role: worker}}
spec:
  pinnedImages:
    - name: ${A}
    - name: ${B}
`;
const POOL = (sets: string[]) => `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: infra}
spec:
  machineConfigSelector: {matchLabels: {machineconfiguration.openshift.io/role: infra}}
  nodeSelector: {matchLabels: {node-role.kubernetes.io/infra: ""}}
  pinnedImageSets: [${sets.map((s) => `{name: ${s}}`).join(', ')}]
`;

test('apply a PinnedImageSet and a pool that names it; get lists it, -o wide with its pool, -o yaml as MCO\'s object', async () => {
  const applied = await mcctl('apply', '-f', file('set.yaml', `${SET}---\n${POOL(['workload-images'])}`));
  assert.equal(applied.status, 0, applied.stderr);
  assert.match(applied.stdout, /^pinnedimageset\/workload-images created$/m);
  assert.match(applied.stdout, /^machineconfigpool\/infra created$/m);
  assert.doesNotMatch(applied.stderr, /PinnedImageSet/, 'the set came in the same Apply: no warning');

  const table = await mcctl('get', 'pinnedimagesets');
  assert.equal(table.status, 0, table.stderr);
  assert.match(table.stdout, /^NAME +IMAGES +AGE$/m);
  assert.match(table.stdout, /^workload-images +2 +\S+$/m);
  // kubectl's names: the kind and the plural (MCO's CRD has no short name).
  assert.equal((await mcctl('get', 'pinnedimageset', 'workload-images')).status, 0);
  assert.match((await mcctl('get', 'pinnedimagesets', '-o', 'wide')).stdout, /^workload-images +2 +\S+ +infra$/m);

  const yaml = parse((await mcctl('get', 'pinnedimagesets', 'workload-images', '-o', 'yaml')).stdout);
  assert.equal(yaml.apiVersion, 'machineconfiguration.openshift.io/v1');
  assert.equal(yaml.kind, 'PinnedImageSet');
  assert.deepEqual(yaml.spec, { pinnedImages: [{ name: A }, { name: B }] });
  assert.deepEqual(yaml.metadata.labels, { 'machineconfiguration.openshift.io/role': 'worker' });
  assert.ok(Number.isInteger(yaml.metadata.generation) && yaml.metadata.generation > 0, `generation ${yaml.metadata.generation}`);

  const pool = parse((await mcctl('get', 'pools', 'infra', '-o', 'yaml')).stdout);
  assert.deepEqual(pool.spec.pinnedImageSets, [{ name: 'workload-images' }]);
  assert.match((await mcctl('describe', 'pool', 'infra')).stdout, /^Pinned Image Sets: +workload-images$/m);

  // A changed set has a higher generation; an unchanged one keeps its own.
  const before = yaml.metadata.generation as number;
  assert.match((await mcctl('apply', '-f', file('same.yaml', SET))).stdout, /^pinnedimageset\/workload-images unchanged$/m);
  const changed = await mcctl('apply', '-f', file('changed.yaml', SET.replace(`    - name: ${B}\n`, '')));
  assert.match(changed.stdout, /^pinnedimageset\/workload-images configured$/m);
  const after = parse((await mcctl('get', 'pinnedimagesets', 'workload-images', '-o', 'yaml')).stdout);
  assert.ok(after.metadata.generation > before, `${after.metadata.generation} > ${before}`);
  assert.deepEqual(after.spec.pinnedImages, [{ name: A }]);
});

test('a set MCO would refuse is refused whole, each problem naming the object, the field and the rule', async () => {
  const bad = `apiVersion: machineconfiguration.openshift.io/v1
kind: PinnedImageSet
metadata: {name: bad-images}
spec:
  pinnedImages:
    - name: quay.io/example/app:latest
    - name: ${A}
    - name: ${A}
    - {name: "not a host/x@sha256:${'c'.repeat(64)}", tag: v1}
`;
  for (const args of [['apply', '-f'], ['validate', '-f']]) {
    const r = args[0] === 'apply' ? await mcctl(...args, file('bad.yaml', bad)) : await runCliAsync([...args, file('bad.yaml', bad)]);
    assert.notEqual(r.status, 0, `${args[0]} refuses`);
    assert.match(r.stderr, /PinnedImageSet\/bad-images.*spec\.pinnedImages\[0\]\.name.*quay\.io\/example\/app:latest is not a digest reference.*pinned-image-digest/);
    assert.match(r.stderr, /PinnedImageSet\/bad-images.*spec\.pinnedImages\[2\]\.name.*listed twice.*pinned-image-unique/);
    assert.match(r.stderr, /PinnedImageSet\/bad-images.*spec\.pinnedImages\[3\]\.tag.*unknown field/);
    assert.match(r.stderr, /PinnedImageSet\/bad-images.*spec\.pinnedImages\[3\]\.name.*host\[:port\]\[\/namespace\]\/name.*pinned-image-name/);
  }
  const empty = await mcctl('apply', '-f', file('empty.yaml', 'apiVersion: machineconfiguration.openshift.io/v1\nkind: PinnedImageSet\nmetadata: {name: empty}\nspec: {pinnedImages: []}\n'));
  assert.notEqual(empty.status, 0);
  assert.match(empty.stderr, /PinnedImageSet\/empty.*spec\.pinnedImages.*at least one image.*pinned-images-min-items/);
  const many = `apiVersion: machineconfiguration.openshift.io/v1\nkind: PinnedImageSet\nmetadata: {name: many}\nspec:\n  pinnedImages:\n${Array.from({ length: 501 }, (_, i) => `    - name: quay.io/example/i${i}@sha256:${'d'.repeat(64)}\n`).join('')}`;
  const tooMany = await mcctl('apply', '-f', file('many.yaml', many));
  assert.match(tooMany.stderr, /PinnedImageSet\/many.*spec\.pinnedImages.*501 images; at most 500.*pinned-images-max-items/);
  const badPool = await mcctl('apply', '-f', file('badpool.yaml', POOL(['workload-images', 'workload-images', '"Not_A_Name"'])));
  assert.notEqual(badPool.status, 0);
  assert.match(badPool.stderr, /MachineConfigPool\/infra.*spec\.pinnedImageSets\[1\]\.name.*listed twice.*duplicate-entry/);
  assert.match(badPool.stderr, /MachineConfigPool\/infra.*spec\.pinnedImageSets\[2\]\.name.*not a PinnedImageSet name.*pinned-image-set-name/);
  assert.match((await mcctl('get', 'pinnedimagesets')).stdout, /^workload-images /m, 'nothing of the refused Applies was stored');
  assert.doesNotMatch((await mcctl('get', 'pinnedimagesets')).stdout, /bad-images|empty|many/);
});

test('a pool naming a set that does not exist is applied with a warning naming the pool, the field and the set', async () => {
  const r = await mcctl('apply', '-f', file('pool2.yaml', POOL(['workload-images', 'not-yet'])));
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /^Warning: MachineConfigPool\/infra: spec\.pinnedImageSets\[1\]\.name: PinnedImageSet\/not-yet does not exist; the pool's nodes pin nothing for it until it is applied$/m);
  assert.doesNotMatch(r.stderr, /workload-images does not exist/);
});

test('delete a PinnedImageSet: it is gone, and the pool that names it stays', async () => {
  const r = await mcctl('delete', 'pinnedimageset', 'workload-images');
  assert.equal(r.status, 0, r.stderr);
  assert.doesNotMatch((await mcctl('get', 'pinnedimagesets')).stdout, /workload-images/);
  const missing = await mcctl('get', 'pinnedimagesets', 'workload-images');
  assert.notEqual(missing.status, 0);
  assert.match(missing.stderr, /PinnedImageSet.*workload-images.*not found/i);
  assert.equal((await mcctl('get', 'pools', 'infra')).status, 0);
});
