// Staging before the drain (issue 32) with the real agent under a sandbox host, the real server
// and the Kubernetes API stand-in: a config with a new OS image is downloaded while the node
// still serves; a download that fails never drains the node, which stays schedulable and on its
// config, its staging Failed naming the image and the cause, and is retried; once staged, the
// drain and the apply follow, and the apply takes the image from rpm-ostree's cache (-C).

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startKubeApiStandIn } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { call } from '../../src/cli/client/call.ts';
import { untilNode } from '../helpers/converge.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { addNode, addPod, type KubeObjectLike } from '../helpers/kube-workloads.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { startTestServer } from '../helpers/test-server.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
const IMAGE = 'quay.io/example/os@sha256:2222';
const FILES = '  config:\n    ignition: {version: 3.4.0}\n    storage:\n      files:\n      - {path: /etc/chrony.conf, mode: 0644, contents: {source: "data:,server%20ntp1"}}\n';

test('a real agent: a failed download never drains the node; it stays schedulable and on its config, staging Failed names the image and the cause, and the retry stages it; then drain and a cache-only apply', { skip }, async () => {
  const standIn = await startKubeApiStandIn({ timeScale: 0.01 });
  addNode(standIn, 'host-a', { 'node-role.kubernetes.io/worker': '' });
  addNode(standIn, 'host-b', { 'node-role.kubernetes.io/worker': '' });
  addPod(standIn, { namespace: 'shop', name: 'web', node: 'host-a', graceSeconds: 60 });
  const kubeconfig = standIn.writeKubeconfig(mkdtempSync(join(tmpdir(), 'staging-real-')));
  const server = await startTestServer({ kubernetes: { kubeconfig }, drain: { retryBaseMs: 150, retryMaxMs: 600, pollMs: 50 } });
  const host = new SandboxHost({ name: 'host-a', server: server.address, pki: server.pki, config: { staging: { retrySeconds: 1, maxRetrySeconds: 2 } } });
  // Sampled all along: was the Node cordoned, or the pod evicted, while the node had not staged?
  // Each sighting keeps its time and is judged against the instant the agent says it staged: the
  // test's own polling sees Staged only some time after the leader has (and has cordoned).
  const sightings: { what: string; at: number }[] = [];
  let watching = false;
  let staged = false;
  let evictionsBefore = 0;
  const evictions = (): number => standIn.requests.filter((r) => r.subresource === 'eviction').length;
  const sampler = setInterval(() => {
    if (!watching || staged) return;
    const node = standIn.get('Node', 'host-a') as unknown as KubeObjectLike;
    if (node.spec?.unschedulable) sightings.push({ what: 'Node cordoned before the node had staged', at: Date.now() });
    if (evictions() > evictionsBefore) sightings.push({ what: 'eviction before the node had staged', at: Date.now() });
  }, 10);
  try {
    const c = server.admin();
    await call(c, c.config.apply.bind(c.config), { manifests: [
      { source: 'pool.yaml', text: poolYaml('worker') },
      { source: 'chrony.yaml', text: mcYaml('50-chrony', 'worker', FILES) },
    ], dryRun: false }, 'apply');
    const first = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.configuration;
    await host.start();
    await untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === first && n.status!.state === 'Done', 60_000);
    const rebootsBefore = host.reboots;
    // The first update drained the node for its file; once uncordoned, a new pod runs there.
    await untilNode(c, [host], 'host-a', () => (standIn.get('Node', 'host-a') as unknown as KubeObjectLike).spec?.unschedulable !== true, 10_000);
    addPod(standIn, { namespace: 'shop', name: 'web-2', node: 'host-a', graceSeconds: 60 });
    evictionsBefore = evictions();
    watching = true;

    // The image source refuses until the test lets it serve.
    host.rpmOstree('standin-fail-download', '1000', `reading manifest sha256:2222 in quay.io/example/os: manifest unknown`);
    await call(c, c.config.apply.bind(c.config), { manifests: [
      { source: 'pool.yaml', text: poolYaml('worker') },
      { source: 'chrony.yaml', text: mcYaml('50-chrony', 'worker', FILES) },
      { source: 'os.yaml', text: mcYaml('60-os', 'worker', `  osImageURL: ${IMAGE}\n`) },
    ], dryRun: false }, 'apply');
    const target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.configuration;
    assert.notEqual(target, first);

    const failed = await untilNode(c, [host], 'host-a', (n) => n.status!.staging?.state === 'Failed', 60_000);
    assert.equal(failed.status!.staging!.config, target);
    assert.match(failed.status!.staging!.reason, new RegExp(`image ${IMAGE.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: .*manifest unknown`));
    assert.match(failed.status!.staging!.reason, /retry \d+ in \d+s/);
    // Untouched: on its config, Done (available), never handed the target, not rebooted, the Node schedulable.
    assert.equal(failed.status!.state, 'Done');
    assert.equal(failed.status!.currentConfig, first);
    assert.equal(host.reboots, rebootsBefore);
    assert.notEqual((standIn.get('Node', 'host-a') as unknown as KubeObjectLike).spec?.unschedulable, true);
    assert.deepEqual(deployCalls(host), [], 'nothing was deployed while the download failed');
    // mcctl says it: the node Done, its staging Failed with the image and the cause.
    // (A retry may be running at that instant: asked again until it shows the failure.)
    let described = { status: 0 as number | null, stdout: '', stderr: '' };
    for (let i = 0; i < 20 && !/^ {2}State: +Failed$/m.test(described.stdout); i++) {
      described = await runCliAsync(['describe', 'node', 'host-a'], { env: { MCPLANE_SERVER: server.address, MCPLANE_PKI_DIR: server.pki.dir } });
      assert.equal(described.status, 0, described.stderr);
    }
    assert.match(described.stdout, /^State: +Done$/m);
    assert.match(described.stdout, new RegExp(`^Staging:\n  Config: +${target}\n  State: +Failed\n`, 'm'));
    assert.match(described.stdout, /^ {2}Reason: +stage: image quay\.io\/example\/os@sha256:2222: .*manifest unknown/m);

    // The pool is Degraded for it, naming the node, the image and the cause.
    await eventually(async () => {
      const conditions = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.conditions;
      const staging = conditions.find((x) => x.type === 'StagingDegraded');
      const degraded = conditions.find((x) => x.type === 'Degraded');
      return staging?.status === 'True' && /host-a \(stage: image quay\.io\/example\/os@sha256:2222: .*manifest unknown/.test(staging.message) &&
        degraded?.status === 'True' && degraded.reason.includes('StagingFailed');
    }, 30_000, 'the pool says the node could not stage');
    // Retried with backoff while it fails; still never drained (the sampler watches).
    await untilNode(c, [host], 'host-a', () => calls(host).filter((l) => l.includes('--download-only')).length >= 3, 60_000);
    const failedAttempts = calls(host).filter((l) => l.includes('--download-only')).length;
    assert.equal((await untilNode(c, [host], 'host-a', () => true)).status!.currentConfig, first);
    // The source serves again: the next retry stages it; only then the drain, and the apply from the cache.
    host.rpmOstree('standin-fail-download', '0');
    const done = await untilNode(c, [host], 'host-a', (n) => {
      if (n.status!.staging?.state === 'Staged') staged = true;
      return n.status!.currentConfig === target && n.status!.state === 'Done';
    }, 90_000);
    assert.equal(done.status!.os?.bootedImage, IMAGE);
    const stagedAt = done.status!.staging!.endedUnixMs;
    assert.ok(stagedAt > 0, 'the staging that succeeded has its end time');
    assert.deepEqual(sightings.filter((v) => v.at < stagedAt).map((v) => `${v.what} (${stagedAt - v.at} ms before)`), []);
    const downloads = calls(host).filter((l) => l.includes('--download-only'));
    assert.ok(downloads.length > failedAttempts && failedAttempts >= 3, `failed downloads retried, then one that succeeded: ${downloads.join(' | ')}`);
    assert.deepEqual(deployCalls(host), [`rebase --experimental ostree-unverified-registry:${IMAGE} -C`], 'the apply came from the cache');
    assert.equal(done.status!.staging?.config, target);
    assert.equal(done.status!.staging?.state, 'Staged');
    const evicted = standIn.requests.filter((r) => r.subresource === 'eviction' && r.code === 201).map((r) => r.name);
    assert.deepEqual(evicted, ['web', 'web-2'], 'drained once staged');
  } finally {
    clearInterval(sampler);
    await host.stop();
    await server.close();
    await standIn.close();
  }
});

function calls(host: SandboxHost): string[] {
  return (JSON.parse(readFileSync(host.standinState, 'utf8')) as { calls: string[] }).calls;
}

/** The rpm-ostree commands that deploy (not status, kargs reads or download-only runs). */
function deployCalls(host: SandboxHost): string[] {
  return calls(host).filter((l) => /^(rebase|update|override)\b/.test(l) && !l.includes('--download-only'));
}
