// Pinned image pulls as part of staging, and a held drain that does not hold them back, with the
// real parts: the real server draining through the Kubernetes API stand-in, the real agent under a
// sandbox host (real systemd user manager), and a real CRI (Debian's containerd on a unix socket,
// pulling from Debian's docker-registry on loopback). CRI-O cannot run here: crio.service is the
// sandbox's stand-in unit.
// - With staging on (the default), an update of a pool whose pinned image sets are not on the
//   node yet is staged first, the sets included: the node is not Staged, so not drained, until
//   they are pulled. A set that fails leaves it serving, uncordoned, its staging Failed naming the
//   set and the image, and the pool saying it could not stage.
// - A node held in its drain (a PodDisruptionBudget) still gets a set change and pulls it.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { stringify } from 'yaml';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { CriImageClient } from '../../src/agent/cri-image-client.ts';
import type { Node__Output } from '../../src/runtime/generated/mcplane/v1/Node.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { canRunContainerd, startContainerd, type Containerd } from '../helpers/containerd.ts';
import { containerRuntimeBase } from '../helpers/container-runtime-base.ts';
import { untilNode } from '../helpers/converge.ts';
import { startKubeRealAgentBed, type KubeRealAgentBed } from '../helpers/kube-real-agent-bed.ts';
import { addPod, type KubeObjectLike } from '../helpers/kube-workloads.ts';
import { fileEntry, ign, mcDoc, pinnedImageSetDoc, workerPoolWithSets, type Doc } from '../helpers/manifests.ts';
import { startRegistry, type PushedImage, type Registry } from '../helpers/registry.ts';
import { eventually } from '../helpers/simulated-agent.ts';

const skip = (!canRunUserSystemd() || !canRunContainerd()) && 'needs root for a systemd user manager and for containerd\'s CRI';
let registry: Registry;
let containerd: Containerd;
let cri: CriImageClient;
let bed: KubeRealAgentBed;
let c: Clients;
const images = {} as Record<'app' | 'extra', PushedImage>;

before(async () => {
  if (skip) return;
  registry = await startRegistry();
  containerd = await startContainerd({ plainHttpRegistries: [registry.host] });
  cri = new CriImageClient(containerd.socket);
  for (const name of ['app', 'extra'] as const) images[name] = await registry.pushImage(`pis-stage/${name}`, { [`${name}.txt`]: `the ${name} image\n` });
  bed = await startKubeRealAgentBed({
    tmpPrefix: 'pis-stage-',
    pods: [{ namespace: 'shop', name: 'web', labels: { app: 'web' } }],
    drain: { retryBaseMs: 100, retryMaxMs: 300, pollMs: 50 },
    hostConfig: { criSocket: containerd.socket, pinnedImages: { minFreeBytes: 0, imageSizeBytes: 4096, retrySeconds: 3600 } },
  });
  c = bed.server.admin();
});
after(async () => {
  if (skip) return;
  await bed?.close();
  cri?.close();
  await containerd?.stop();
  await registry?.stop();
});

const apply = (...docs: Doc[]) => call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'pis.yaml', text: docs.map((d) => stringify(d)).join('---\n') }], dryRun: false }, 'apply');
const fileMc = (name: string, path: string, text: string): Doc => mcDoc(name, 'worker', { config: ign('3.4.0', { storage: { files: [fileEntry(path, text)] } }) });
const target = async () => (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.configuration;
const setOf = (n: Node__Output, name: string) => n.status?.pinnedImageSets.find((s) => s.name === name);
const kubeNode = () => bed.standIn.get('Node', 'host-a') as unknown as KubeObjectLike;
const evictions = () => bed.standIn.requests.filter((r) => r.subresource === 'eviction').map((r) => r.name);
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
let base: Doc[] = [];
let first = '';

test('the node comes up Done on its first config', { skip }, async () => {
  base = containerRuntimeBase(`${bed.host.root}/crio-reloads`);
  await apply(...base, workerPoolWithSets());
  first = await target();
  await bed.host.start();
  await untilNode(c, [bed.host], 'host-a', (n) => n.status!.state === 'Done' && n.status!.currentConfig === first);
  bed.host.systemd.systemctl('start', 'crio.service');
});

test('a set that cannot be pulled holds the update in staging: not drained, serving on its config, the pool says so; once the set is pulled the node is drained and updated', { skip }, async () => {
  const missing = `${registry.host}/pis-stage/app@sha256:${'0'.repeat(64)}`;
  // The first config rebooted the host, so its drain evicted web already; a pod for this update's.
  addPod(bed.standIn, { namespace: 'shop', name: 'cart', node: 'host-a' });
  const evictedBefore = evictions().length;
  // A file no policy covers: the update reboots, so the leader drains first. It downloads
  // nothing: only the pinned set makes it need staging.
  await apply(...base, fileMc('50-chrony', '/etc/chrony.conf', 'server ntp1\n'), pinnedImageSetDoc('release', [missing]), workerPoolWithSets('release'));
  const t1 = await target();
  assert.notEqual(t1, first);
  const failed = await untilNode(c, [bed.host], 'host-a', (n) => n.status!.staging?.config === t1 && n.status!.staging.state === 'Failed', 120_000);
  assert.match(failed.status!.staging!.reason, new RegExp(`^stage: pinned image sets: PinnedImageSet/release: ${esc(missing)}: pulling .* failed after 5 attempts`));
  assert.equal(setOf(failed, 'release')?.state, 'Failed');
  // Serving on its config: not cordoned, nothing evicted, the file not written.
  assert.equal(failed.status!.state, 'Done');
  assert.equal(failed.status!.currentConfig, first);
  assert.notEqual(kubeNode().spec?.unschedulable, true, 'the Node is not cordoned');
  assert.deepEqual(evictions().slice(evictedBefore), [], 'nothing evicted');
  assert.equal(bed.host.file('etc/chrony.conf'), undefined);
  const pool = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool');
  assert.ok(pool.status!.conditions.some((x) => /could not stage/.test(x.message) && x.message.includes('PinnedImageSet/release')), JSON.stringify(pool.status!.conditions));

  // The set fixed (a new generation): pulled, then Staged, then drained and updated.
  await apply(...base, fileMc('50-chrony', '/etc/chrony.conf', 'server ntp1\n'), pinnedImageSetDoc('release', [images.app.reference]), workerPoolWithSets('release'));
  const done = await untilNode(c, [bed.host], 'host-a', (n) => n.status!.state === 'Done' && n.status!.currentConfig === t1, 120_000);
  assert.equal(setOf(done, 'release')?.state, 'Pulled');
  assert.equal(done.status!.staging?.state, 'Staged');
  assert.equal(done.status!.staging?.reason, 'nothing to download; pinned image sets pulled (1)');
  assert.ok((await cri.imageStatus(images.app.reference))?.repoDigests.includes(images.app.reference));
  assert.deepEqual(evictions().slice(evictedBefore).filter((n) => n === 'cart'), ['cart'], 'drained');
  // The drain came after the staging (the pull) ended.
  const history = await call(c, c.status.getNodeHistory.bind(c.status), { name: 'host-a' }, 'history');
  const drain = history.updates.find((u) => u.toConfig === t1)?.phases.find((p) => p.name === 'drain');
  assert.ok(drain, 'the update to t1 was drained');
  assert.ok(Number(drain.startedUnixMs) >= Number(done.status!.staging!.endedUnixMs), `drain ${drain.startedUnixMs} after staged ${done.status!.staging!.endedUnixMs}`);
});

test('a node held in its drain still gets a pinned set change and pulls it', { skip }, async () => {
  addPod(bed.standIn, { namespace: 'shop', name: 'api', node: 'host-a', labels: { app: 'api' } });
  // Allows no disruption: the drain waits until the test removes it.
  bed.standIn.add({ apiVersion: 'policy/v1', kind: 'PodDisruptionBudget', metadata: { name: 'api-pdb', namespace: 'shop' }, spec: { maxUnavailable: 0, selector: { matchLabels: { app: 'api' } } } } as never);
  const before = await target();
  await apply(...base, fileMc('50-chrony', '/etc/chrony.conf', 'server ntp1\n'), fileMc('60-motd', '/etc/motd', 'held\n'), pinnedImageSetDoc('release', [images.app.reference]), workerPoolWithSets('release'));
  const t2 = await target();
  assert.notEqual(t2, before);
  await eventually(() => kubeNode().spec?.unschedulable === true, 30_000, 'cordoned for the drain');
  // The drain is held by the budget: the config is not sent; a new set is.
  await apply(...base, fileMc('50-chrony', '/etc/chrony.conf', 'server ntp1\n'), fileMc('60-motd', '/etc/motd', 'held\n'), pinnedImageSetDoc('release', [images.app.reference]), pinnedImageSetDoc('late', [images.extra.reference]), workerPoolWithSets('release', 'late'));
  const pulled = await untilNode(c, [bed.host], 'host-a', (n) => setOf(n, 'late')?.state === 'Pulled', 60_000);
  assert.equal(pulled.status!.currentConfig, before, 'still on its config: the drain holds the update');
  assert.equal(kubeNode().spec?.unschedulable, true, 'still cordoned, still draining');
  assert.equal(bed.host.file('etc/motd'), undefined);
  assert.ok((await cri.imageStatus(images.extra.reference))?.repoDigests.includes(images.extra.reference), 'pulled through the CRI while held');
  // The budget goes: the drain ends and the update follows.
  bed.standIn.remove('PodDisruptionBudget', 'api-pdb', 'shop');
  await untilNode(c, [bed.host], 'host-a', (n) => n.status!.state === 'Done' && n.status!.currentConfig === t2, 120_000);
  assert.equal(bed.host.file('etc/motd'), 'held\n');
});
