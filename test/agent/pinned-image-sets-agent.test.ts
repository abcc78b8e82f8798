// PinnedImageSets end to end on a real agent: a real control plane (mTLS gRPC), the real
// mcplane-agent under a sandbox host with a real systemd user manager, and a real CRI: Debian's
// containerd (its CRI plugin on a unix socket, the agent's criSocket) pulling from Debian's
// docker-registry on loopback, images built here. CRI-O cannot run here: crio.service is the
// sandbox's stand-in unit, whose ExecReload counts the reloads systemd runs for the agent.
// The set reaches the agent in its assignment, the images are pulled and the drop-in written as
// MCO's daemon writes it; a pull failure and a set with no room leave the node Done on its config,
// their status naming the image (or the sizes) and the reason.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { stringify } from 'yaml';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { CriImageClient } from '../../src/agent/cri-image-client.ts';
import { CRIO_PINNED_IMAGES_DROP_IN } from '../../src/agent/crio-pinned-images.ts';
import type { Node__Output } from '../../src/runtime/generated/mcplane/v1/Node.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { canRunContainerd, startContainerd, type Containerd } from '../helpers/containerd.ts';
import { containerRuntimeBase } from '../helpers/container-runtime-base.ts';
import { untilNode } from '../helpers/converge.ts';
import { pinnedImageSetDoc, workerPoolWithSets, type Doc } from '../helpers/manifests.ts';
import { startRegistry, type PushedImage, type Registry } from '../helpers/registry.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const skip = (!canRunUserSystemd() || !canRunContainerd()) && 'needs root for a systemd user manager and for containerd\'s CRI';
let server: TestServer;
let c: Clients;
let host: SandboxHost;
let registry: Registry;
let containerd: Containerd;
let cri: CriImageClient;
const images = {} as Record<'app' | 'sidecar' | 'big', PushedImage>;
const MCO = 'machineconfiguration.openshift.io';

before(async () => {
  if (skip) return;
  registry = await startRegistry();
  containerd = await startContainerd({ plainHttpRegistries: [registry.host] });
  cri = new CriImageClient(containerd.socket);
  for (const name of ['app', 'sidecar', 'big'] as const) images[name] = await registry.pushImage(`pis/${name}`, { [`${name}.txt`]: `the ${name} image\n` });
  server = await startTestServer();
  c = server.admin();
  host = new SandboxHost({
    name: 'pis-worker', server: server.address, pki: server.pki,
    // Each set's need is counted small (the test images are a few KiB), no margin kept.
    config: { criSocket: containerd.socket, pinnedImages: { minFreeBytes: 0, imageSizeBytes: 4096, retrySeconds: 3600 } },
  });
});
after(async () => {
  if (skip) return;
  await host?.stop();
  await server?.close();
  cri?.close();
  await containerd?.stop();
  await registry?.stop();
});

const apply = (...docs: Doc[]) => call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'pis.yaml', text: docs.map((d) => stringify(d)).join('---\n') }], dryRun: false }, 'apply');
const reloads = () => (host.file('crio-reloads') ?? '').split('\n').filter(Boolean).length;
const setOf = (n: Node__Output, name: string) => n.status?.pinnedImageSets.find((s) => s.name === name);
const mcctl = (...args: string[]) => runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', ...args]);
let config = '';

test('the node comes up Done on its config with CRI-O\'s stand-in', { skip }, async () => {
  await apply(...containerRuntimeBase(`${host.root}/crio-reloads`));
  await host.start();
  const node = await untilNode(c, [host], 'pis-worker', (n) => n.status!.state === 'Done' && n.status!.currentConfig !== '');
  config = node.status!.currentConfig;
  // Enabled by the config, started as a boot would start it: a reload needs a running unit.
  host.systemd.systemctl('start', 'crio.service');
  assert.equal(host.systemd.systemctl('is-active', 'crio.service').stdout.trim(), 'active');
  assert.deepEqual(node.status!.pinnedImageSets, [], 'no set yet');
});

test('a set the pool names is pulled through the CRI and pinned in CRI-O\'s drop-in as MCO writes it, CRI-O reloaded once', { skip }, async () => {
  const { app, sidecar } = images;
  assert.equal(await cri.imageStatus(app.reference), null, 'not on the node before');
  const before = reloads();
  await apply(pinnedImageSetDoc('workload', [sidecar.reference, app.reference]), workerPoolWithSets('workload'));
  const node = await untilNode(c, [host], 'pis-worker', (n) => setOf(n, 'workload')?.state === 'Pulled');
  const s = setOf(node, 'workload')!;
  assert.ok(s.desiredGeneration > 0);
  assert.equal(s.currentGeneration, s.desiredGeneration);
  assert.deepEqual([s.imagesDone, s.imagesTotal, s.lastFailedImage, s.lastFailureReason, s.lastFailureCode], [2, 2, '', '', '']);
  for (const image of [app, sidecar]) assert.ok((await cri.imageStatus(image.reference))?.repoDigests.includes(image.reference), `${image.reference} is on the node`);
  const sorted = [app.reference, sidecar.reference].sort();
  assert.equal(host.file(CRIO_PINNED_IMAGES_DROP_IN), `[crio]\n  [crio.image]\n    pinned_images = ["${sorted[0]}", "${sorted[1]}"]\n`);
  // The reload is systemd's ReloadUnit of the real unit: its ExecReload ran.
  await untilNode(c, [host], 'pis-worker', () => reloads() === before + 1);
  assert.equal(node.status!.state, 'Done');
  assert.equal(node.status!.currentConfig, config, 'no update: pinning is not a config change');

  const described = await mcctl('describe', 'node', 'pis-worker');
  assert.match(described.stdout, /^Pinned Image Sets:\n +NAME +STATE +IMAGES +GENERATION +FAILED IMAGE +REASON\n +workload +Pulled +2\/2 +(\d+)\/\1 +<none> +<none>$/m);
});

test('an image that cannot be pulled fails its set, naming the image and the runtime\'s reason; the node stays Done on its config and the pins stay', { skip }, async () => {
  const missing = `${registry.host}/pis/app@sha256:${'0'.repeat(64)}`;
  const dropIn = host.file(CRIO_PINNED_IMAGES_DROP_IN);
  const before = reloads();
  await apply(pinnedImageSetDoc('broken', [missing]), workerPoolWithSets('workload', 'broken'));
  // MCO's retries: 5 attempts, 1 s doubling.
  const node = await untilNode(c, [host], 'pis-worker', (n) => setOf(n, 'broken')?.state === 'Failed', 90_000);
  const s = setOf(node, 'broken')!;
  assert.equal(s.lastFailedImage, missing);
  assert.equal(s.lastFailureCode, 'MCPLANE_PINNED_IMAGE_PULL');
  assert.match(s.lastFailureReason, /^pulling .*@sha256:0{64} failed after 5 attempts: CRI ImageService\.PullImage: .*not found/);
  assert.ok(s.lastFailureUnixMs > 0);
  assert.equal(s.currentGeneration, 0, 'never pulled');
  assert.equal(setOf(node, 'workload')?.state, 'Pulled', 'the other set is still pulled');
  assert.equal(node.status!.state, 'Done');
  assert.equal(node.status!.currentConfig, config);
  assert.equal(node.status!.reason, '');
  // As MCO: while a set fails, the drop-in is left as it was.
  assert.equal(host.file(CRIO_PINNED_IMAGES_DROP_IN), dropIn);
  assert.equal(reloads(), before);

  const described = await mcctl('describe', 'node', 'pis-worker');
  assert.match(described.stdout, new RegExp(`^ +broken +Failed +0/1 +<none>/\\d+ +${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} +MCPLANE_PINNED_IMAGE_PULL: pulling `, 'm'));
  const yaml = await mcctl('get', 'node', 'pis-worker', '-o', 'yaml');
  assert.match(yaml.stdout, /lastFailedImage: .*@sha256:0{64}/);
});

test('a set with no room on the image filesystem is refused before any pull, naming the sizes; the node stays Done', { skip }, async () => {
  const { big } = images;
  // The agent keeps 1 PiB free from now on: no image filesystem here has that.
  await host.kill('SIGTERM');
  host.options.config = { ...host.options.config, pinnedImages: { minFreeBytes: 2 ** 50, imageSizeBytes: 4096, retrySeconds: 3600 } };
  await host.start();
  await apply(pinnedImageSetDoc('large', [big.reference]), workerPoolWithSets('workload', 'large'));
  const node = await untilNode(c, [host], 'pis-worker', (n) => setOf(n, 'large')?.state === 'Refused');
  const s = setOf(node, 'large')!;
  assert.equal(s.lastFailureCode, 'MCPLANE_PINNED_IMAGE_DISK_SPACE');
  assert.equal(s.lastFailedImage, '', 'the set as a whole');
  assert.match(s.lastFailureReason, new RegExp(`^PinnedImageSet/large: image filesystem ${containerd.root.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\S* has \\d+ bytes free; the set's missing images need 8192 bytes and ${2 ** 50} bytes must stay free, so nothing of the set is pulled$`));
  assert.equal(await cri.imageStatus(big.reference), null, 'nothing was pulled');
  assert.equal(node.status!.state, 'Done');
  assert.equal(node.status!.currentConfig, config);
  // The set already on the node needs no room: it stays pulled.
  assert.equal(setOf(node, 'workload')?.state, 'Pulled');
});

test('a pool that names no set any more unpins: the drop-in is removed and CRI-O reloaded', { skip }, async () => {
  const before = reloads();
  await apply(workerPoolWithSets());
  await untilNode(c, [host], 'pis-worker', (n) => n.status!.pinnedImageSets.length === 0 && host.file(CRIO_PINNED_IMAGES_DROP_IN) === undefined);
  await untilNode(c, [host], 'pis-worker', () => reloads() === before + 1);
});

test('a CRI-O that cannot be reloaded: the set is pulled but says it is not pinned, with systemd\'s reason; the node stays Done', { skip }, async () => {
  const { app } = images;
  host.systemd.systemctl('stop', 'crio.service');
  await apply(pinnedImageSetDoc('again', [app.reference]), workerPoolWithSets('again'));
  const node = await untilNode(c, [host], 'pis-worker', (n) => setOf(n, 'again')?.lastFailureReason.startsWith('pulled, but not pinned: ') === true);
  const s = setOf(node, 'again')!;
  assert.equal(s.state, 'Pulled');
  assert.equal(s.lastFailedImage, '');
  assert.equal(s.lastFailureCode, 'MCPLANE_SYSTEMD');
  assert.match(s.lastFailureReason, /crio\.service/);
  assert.ok(s.lastFailureUnixMs > 0);
  // The file is written; the reload that would make CRI-O read it is what failed.
  assert.match(host.file(CRIO_PINNED_IMAGES_DROP_IN) ?? '', /pinned_images = \[/);
  assert.equal(node.status!.state, 'Done');
  assert.equal(node.status!.currentConfig, config);
});
