// The agent's pinned image puller against a real CRI: Debian's containerd (its CRI plugin serves
// runtime.v1 on a unix socket) pulling from a real registry (Debian's docker-registry) on
// loopback, images built here. CRI-O itself cannot run here, so its reload is a stand-in that
// counts the reloads MCO would do; the drop-in is compared with the bytes MCO's encoder writes.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { CriImageClient } from '../../src/agent/cri-image-client.ts';
import { CRIO_PINNED_IMAGES_DROP_IN, crioPinnedImagesToml, uniqueSortedImageNames } from '../../src/agent/crio-pinned-images.ts';
import { PinnedImagePuller, type PinnedImagePullerOptions } from '../../src/agent/pinned-images.ts';
import { canRunContainerd, startContainerd, type Containerd } from '../helpers/containerd.ts';
import { startRegistry, type PushedImage, type Registry } from '../helpers/registry.ts';

let registry: Registry;
let containerd: Containerd;
let cri: CriImageClient;
const images: Record<string, PushedImage> = {};
const hostRoots: string[] = [];
const skip = !canRunContainerd() && 'needs root and Debian\'s containerd to run a real CRI';

before(async () => {
  if (skip) return;
  registry = await startRegistry();
  containerd = await startContainerd({ plainHttpRegistries: [registry.host] });
  cri = new CriImageClient(containerd.socket);
  for (const name of ['app', 'sidecar', 'tool', 'big']) images[name] = await registry.pushImage(`pinned/${name}`, { [`${name}.txt`]: `the ${name} image\n` });
});

after(async () => {
  cri?.close();
  await containerd?.stop();
  await registry?.stop();
  for (const root of hostRoots) rmSync(root, { recursive: true, force: true });
});

/** A host root and a puller on it, with quick retries and a stand-in for CRI-O's reload. */
function puller(options: Partial<PinnedImagePullerOptions> = {}): { puller: PinnedImagePuller; root: string; reloads: () => number } {
  const root = mkdtempSync(join(tmpdir(), 'pinned-host-'));
  hostRoots.push(root);
  let reloads = 0;
  const p = new PinnedImagePuller({
    cri,
    root,
    minFreeBytes: 0,
    imageSizeBytes: () => 4096,
    retry: { attempts: 3, initialMs: 20, factor: 2, capMs: 100 },
    reloadRuntime: async () => { reloads++; },
    ...options,
  });
  return { puller: p, root, reloads: () => reloads };
}

const dropIn = (root: string): string => readFileSync(join(root, CRIO_PINNED_IMAGES_DROP_IN), 'utf8');

test('a set pulled by digest: ImageStatus then shows each image, and the drop-in pins them as MCO writes it', { skip }, async () => {
  const { app, sidecar } = images as Record<string, PushedImage>;
  assert.equal(await cri.imageStatus(app!.reference), null, 'the image is not on the node before the sync');
  const { puller: p, root, reloads } = puller();
  const status = await p.sync([{ name: 'workload', generation: 3, images: [sidecar!.reference, app!.reference] }]);
  assert.deepEqual(status.sets, [{ name: 'workload', desiredGeneration: 3, currentGeneration: 3, state: 'Pulled', imagesDone: 2, imagesTotal: 2, lastFailure: null }]);
  for (const image of [app!, sidecar!]) {
    const got = await cri.imageStatus(image.reference);
    assert.ok(got, `${image.reference} is on the node`);
    assert.ok(got.repoDigests.includes(image.reference), `${JSON.stringify(got.repoDigests)} has ${image.reference}`);
  }
  // MCO's order (sort.Strings) and its TOML, whatever order the set lists them in.
  const sorted = [app!.reference, sidecar!.reference].sort();
  assert.equal(dropIn(root), `[crio]\n  [crio.image]\n    pinned_images = ["${sorted[0]}", "${sorted[1]}"]\n`);
  assert.equal(reloads(), 1);
  assert.equal(status.dropIn.lastChange, 'written');
  assert.equal(status.imageFilesystem?.mountpoint.startsWith(containerd.root), true, `image filesystem ${status.imageFilesystem?.mountpoint} is containerd's`);

  // Nothing changed: MCO neither rewrites nor reloads.
  const again = await p.sync([{ name: 'workload', generation: 3, images: [app!.reference, sidecar!.reference] }]);
  assert.equal(again.sets[0]!.state, 'Pulled');
  assert.equal(again.dropIn.lastChange, 'unchanged');
  assert.equal(reloads(), 1);

  // No set left: the drop-in goes, and CRI-O is reloaded to forget the pins.
  const none = await p.sync([]);
  assert.equal(none.dropIn.lastChange, 'removed');
  assert.equal(existsSync(join(root, CRIO_PINNED_IMAGES_DROP_IN)), false);
  assert.equal(reloads(), 2);
});

test('an unknown digest is the set\'s failure, with the image and the reason; the other images are pulled and nothing throws', { skip }, async () => {
  const { tool } = images as Record<string, PushedImage>;
  const unknown = `${registry.host}/pinned/tool@sha256:${'0'.repeat(64)}`;
  const { puller: p, root, reloads } = puller();
  const status = await p.sync([{ name: 'with-a-ghost', generation: 1, images: [unknown, tool!.reference] }]);
  const set = status.sets[0]!;
  assert.equal(set.state, 'Failed');
  assert.equal(set.imagesDone, 1);
  assert.equal(set.imagesTotal, 2);
  assert.equal(set.currentGeneration, null);
  assert.equal(set.desiredGeneration, 1);
  assert.equal(set.lastFailure?.image, unknown);
  assert.equal(set.lastFailure?.code, 'MCPLANE_PINNED_IMAGE_PULL');
  assert.match(set.lastFailure!.reason, /after 3 attempts: CRI ImageService\.PullImage: NOT_FOUND: .*not found/);
  assert.ok(await cri.imageStatus(tool!.reference), 'the good image was pulled');
  assert.equal(await cri.imageStatus(unknown), null);
  // As MCO: no pins until every image of every set is there.
  assert.equal(existsSync(join(root, CRIO_PINNED_IMAGES_DROP_IN)), false);
  assert.equal(reloads(), 0);
});

test('a set the image filesystem has no room for is refused before any pull, naming the mountpoint, the free and the needed bytes', { skip }, async () => {
  const { big, app } = images as Record<string, PushedImage>;
  const info = await cri.imageFsInfo();
  const mountpoint = info.imageFilesystems[0]!.mountpoint;
  const st = statfsSync(mountpoint);
  const free = Number(st.bavail) * Number(st.bsize);
  // A threshold above what is free: no set with a missing image may go ahead.
  const { puller: p, root } = puller({ minFreeBytes: free + 1024 ** 3, imageSizeBytes: () => 5000 });
  const status = await p.sync([{ name: 'too-big', generation: 2, images: [big!.reference] }, { name: 'already-there', generation: 1, images: [app!.reference] }]);
  const [tooBig, there] = status.sets;
  assert.equal(tooBig!.state, 'Refused');
  assert.equal(tooBig!.imagesDone, 0);
  assert.equal(tooBig!.lastFailure?.code, 'MCPLANE_PINNED_IMAGE_DISK_SPACE');
  assert.equal(tooBig!.lastFailure?.image, null);
  const reason = tooBig!.lastFailure!.reason;
  assert.ok(reason.includes(`image filesystem ${mountpoint} has `), reason);
  assert.match(reason, /has (\d+) bytes free; the set's missing images need 10000 bytes and (\d+) bytes must stay free/);
  const reportedFree = Number(/has (\d+) bytes free/.exec(reason)![1]);
  assert.ok(Math.abs(reportedFree - free) < 256 * 1024 ** 2, `free ${reportedFree} is what statfs says (${free})`);
  assert.equal(await cri.imageStatus(big!.reference), null, 'nothing of the refused set was pulled');
  // A set whose images are all there needs no room and is complete.
  assert.equal(there!.state, 'Pulled');
  assert.equal(existsSync(join(root, CRIO_PINNED_IMAGES_DROP_IN)), false, 'no pins while a set is refused');
});

test('a tag is refused, naming the set, the image, the field and the rule; nothing is pulled', { skip }, async () => {
  const tagged = `${registry.host}/pinned/app:latest`;
  const { puller: p } = puller();
  const status = await p.sync([{ name: 'tagged', generation: 1, images: [tagged] }]);
  const set = status.sets[0]!;
  assert.equal(set.state, 'Refused');
  assert.equal(set.lastFailure?.image, tagged);
  assert.equal(set.lastFailure?.code, 'MCPLANE_INVALID_DOCUMENT');
  assert.equal(set.lastFailure?.reason, `PinnedImageSet/tagged: spec.pinnedImages[0].name: ${tagged} is not a digest reference: a pinned image must end with @sha256:<64 lowercase hex digits> (a tag can later name other bytes, so it cannot be pinned) [pinned-image-digest]`);
  assert.equal(await cri.imageStatus(tagged), null);
});

test('the drop-in\'s bytes are those of MCO\'s encoder for MCO\'s own test list, sorted and without duplicates', () => {
  // TestEnsureCrioPinnedImagesConfigFile's images (pkg/daemon/pinned_image_set_test.go).
  const b = `quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:${'b'.repeat(64)}`;
  const a = `quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:${'a'.repeat(64)}`;
  const c = `quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:${'c'.repeat(64)}`;
  const names = uniqueSortedImageNames([b, a, c, a, ' ']);
  assert.deepEqual(names, [a, b, c]);
  // BurntSushi/toml v1.5.0 Encode of MCO's tomlConfig struct, traced by hand through encode.go.
  assert.equal(crioPinnedImagesToml(names), `[crio]\n  [crio.image]\n    pinned_images = ["${a}", "${b}", "${c}"]\n`);
  assert.equal(crioPinnedImagesToml([]), '[crio]\n  [crio.image]\n');
});

test('a runtime that does not answer fails every set with the call and the reason, and the sync still resolves', { skip }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pinned-host-'));
  hostRoots.push(dir);
  const gone = new CriImageClient(join(dir, 'no-runtime.sock'), { callTimeoutMs: 1000 });
  try {
    const { puller: p } = puller({ cri: gone });
    const status = await p.sync([{ name: 'workload', generation: 4, images: [images.app!.reference] }]);
    assert.equal(status.sets[0]!.state, 'Failed');
    assert.equal(status.sets[0]!.lastFailure?.code, 'MCPLANE_CRI_CALL');
    assert.match(status.sets[0]!.lastFailure!.reason, /^CRI ImageService\.ImageFsInfo: UNAVAILABLE: .*no-runtime\.sock/);
    assert.equal(status.imageFilesystem, null);
  } finally {
    gone.close();
  }
});

test('pulls run at most `concurrency` at a time, each image once however many sets list it, and the status shows the progress mid-sync', { skip }, async () => {
  const many: string[] = [];
  for (let i = 0; i < 6; i++) many.push((await registry.pushImage(`pinned/many${i}`, { [`f${i}`]: `image ${i}\n` })).reference);
  // The real client, counting what is in flight on its way to containerd.
  class CountingClient extends CriImageClient {
    inFlight = 0;
    maxInFlight = 0;
    pulls: string[] = [];
    seen: ReturnType<PinnedImagePuller['status']>[] = [];
    owner: PinnedImagePuller | undefined;
    override async pullImage(image: string): Promise<string> {
      this.pulls.push(image);
      this.maxInFlight = Math.max(this.maxInFlight, ++this.inFlight);
      if (this.owner) this.seen.push(this.owner.status());
      try {
        return await super.pullImage(image);
      } finally {
        this.inFlight--;
      }
    }
  }
  const counting = new CountingClient(containerd.socket);
  try {
    const { puller: p } = puller({ cri: counting, concurrency: 2 });
    counting.owner = p;
    const status = await p.sync([{ name: 'first', generation: 1, images: many.slice(0, 4) }, { name: 'second', generation: 7, images: many.slice(2) }]);
    assert.deepEqual(status.sets.map((s) => [s.name, s.state, s.imagesDone, s.imagesTotal, s.currentGeneration]), [['first', 'Pulled', 4, 4, 1], ['second', 'Pulled', 4, 4, 7]]);
    assert.equal(counting.maxInFlight, 2);
    assert.deepEqual([...counting.pulls].sort(), [...many].sort(), 'each image pulled once');
    const mid = counting.seen.at(-1)!.sets;
    assert.deepEqual(mid.map((s) => s.state), ['Pulling', 'Pulling']);
    assert.ok(mid.some((s) => s.imagesDone > 0 && s.imagesDone < s.imagesTotal), `progress mid-sync: ${JSON.stringify(mid)}`);
    for (const image of many) assert.ok(await cri.imageStatus(image), `${image} is on the node`);
  } finally {
    counting.close();
  }
});

test('a failed reload of CRI-O is recorded, and the next sync reloads although the drop-in is already written', { skip }, async () => {
  const { app } = images as Record<string, PushedImage>;
  let attempts = 0;
  let reloaded = 0;
  // The reload stand-in fails the first time, as systemd would for a crio.service that is stopping.
  const { puller: p, root } = puller({ reloadRuntime: async () => { if (++attempts === 1) throw new Error('Job for crio.service canceled'); reloaded++; } });
  const sets = [{ name: 'workload', generation: 1, images: [app!.reference] }];
  const first = await p.sync(sets);
  assert.equal(first.sets[0]!.state, 'Pulled');
  assert.equal(first.dropIn.lastFailure, 'Job for crio.service canceled');
  assert.equal(dropIn(root), `[crio]\n  [crio.image]\n    pinned_images = ["${app!.reference}"]\n`);
  const second = await p.sync(sets);
  assert.equal(second.dropIn.lastChange, 'unchanged');
  assert.equal(second.dropIn.lastFailure, null);
  assert.equal(reloaded, 1);
  await p.sync(sets);
  assert.equal(reloaded, 1, 'once reloaded, an unchanged drop-in needs no reload');
});
