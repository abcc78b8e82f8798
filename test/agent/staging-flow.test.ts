// Staging before the drain (issue 32) on a real agent under a sandbox host with the real server:
// the disk check refuses a download that would take the file system under its floor before
// rpm-ostree writes anything, naming the file system and the sizes; a pool's downloadWindows
// bound when nodes download and its maintenanceWindows when they are disrupted (staged in the
// night, applied on Saturday).

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse, stringify } from 'yaml';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { ManualClock } from '../../src/controlplane/replica/clock.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { untilNode } from '../helpers/converge.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { startTestServer } from '../helpers/test-server.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
const IMAGE = 'quay.io/example/os@sha256:3333';
const KARGS = mcYaml('50-kargs', 'worker', '  kernelArguments: [a=1]\n');
const OS = mcYaml('60-os', 'worker', `  osImageURL: ${IMAGE}\n`);

const apply = (c: Clients, ...texts: string[]) => call(c, c.config.apply.bind(c.config), { manifests: texts.map((text, i) => ({ source: `m${i}.yaml`, text })), dryRun: false }, 'apply');
const target = async (c: Clients) => (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.configuration;
/** Applies `pool` with KARGS, starts `host` and waits until it is Done on that first config (a new host takes it at once), which it returns. */
async function startOnFirst(c: Clients, host: SandboxHost, pool: string): Promise<string> {
  await apply(c, pool, KARGS);
  const first = await target(c);
  await host.start();
  await untilNode(c, [host], host.options.name, (n) => n.status!.currentConfig === first && n.status!.state === 'Done');
  return first;
}
const calls = (host: SandboxHost): string[] => (JSON.parse(readFileSync(host.standinState, 'utf8')) as { calls: string[] }).calls;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a full disk is refused before any write: staging Failed names the file system, the bytes free and needed; the node stays on its config', { skip }, async () => {
  const server = await startTestServer();
  // A floor no disk here has: the check must refuse, whatever this machine has free.
  const host = new SandboxHost({ name: 'full-disk', server: server.address, pki: server.pki, config: { staging: { minFreeDisk: '4Pi', imageSizes: { [IMAGE]: '1500Mi' }, retrySeconds: 30 } } });
  try {
    const c = server.admin();
    const first = await startOnFirst(c, host, poolYaml('worker'));
    const rebootsBefore = host.reboots;
    await apply(c, poolYaml('worker'), KARGS, OS);
    const want = await target(c);
    const node = await untilNode(c, [host], 'full-disk', (n) => n.status!.staging?.state === 'Failed');
    const s = node.status!.staging!;
    assert.equal(s.config, want);
    const fs = join(host.root, 'sysroot');
    // "<fs> has N bytes free; staging image X (1572864000 bytes) with staging.minFreeDisk (...) kept free needs M bytes free there"
    assert.match(s.reason, new RegExp(`^stage: image ${esc(IMAGE)}: disk: ${esc(fs)} has (\\d+) bytes free; staging image ${esc(IMAGE)} \\(1572864000 bytes\\) with staging.minFreeDisk \\(4503599627370496 bytes\\) kept free needs 4503601200234496 bytes free there`));
    const free = Number(/has (\d+) bytes free/.exec(s.reason)![1]);
    assert.ok(free > 0, 'the bytes free are the file system\'s');
    assert.equal(Number(s.bytesTotal), 1572864000, 'the configured estimate for the image');
    // Nothing written: no download, no deployment; the node serves on its config.
    assert.deepEqual(calls(host).filter((l) => /^(rebase|update|override)\b/.test(l)), []);
    assert.equal(node.status!.state, 'Done');
    assert.equal(node.status!.currentConfig, first);
    assert.equal(host.reboots, rebootsBefore);
    await pause(1000);
    const still = await untilNode(c, [host], 'full-disk', () => true);
    assert.equal(still.status!.currentConfig, first, 'never handed the config it could not stage');
  } finally {
    await host.stop();
    await server.close();
  }
});

test('staged inside the download window, applied inside the maintenance window', { skip }, async () => {
  // Wednesday 2026-11-25 12:00 UTC. Downloads: nightly 22:00-04:00 UTC; disruption: Saturdays 02:00-06:00 UTC.
  const clock = new ManualClock(Date.parse('2026-11-25T12:00:00Z'));
  const server = await startTestServer({ clock });
  const host = new SandboxHost({ name: 'windowed', server: server.address, pki: server.pki });
  const pool = poolYaml('worker', `  downloadWindows:
    - {schedule: "0 22 * * *", duration: 6h, timeZone: UTC}
  maintenanceWindows:
    - {schedule: "0 2 * * 6", duration: 4h, timeZone: UTC}
`);
  try {
    const c = server.admin();
    // A new host takes its first config at once: it serves nothing yet.
    const first = await startOnFirst(c, host, pool);
    const rebootsBefore = host.reboots;
    // The preview says both: it downloads when the download window opens, and is disrupted in the maintenance window.
    const preview = await call(c, c.config.apply.bind(c.config), { manifests: [pool, KARGS, OS].map((text, i) => ({ source: `m${i}.yaml`, text })), dryRun: true }, 'preview');
    assert.deepEqual(preview.nodePreviews.map((n) => [n.node, n.action, n.batch, n.staging, n.window]), [['windowed', 'reboot', 1, '2026-11-25T22:00Z (in 10h)', '2026-11-28T02:00Z (in 2d14h)']]);
    assert.equal(Number(preview.nodePreviews[0]!.stagesAtUnixMs), Date.parse('2026-11-25T22:00:00Z'));
    assert.equal(Number(preview.nodePreviews[0]!.startsAtUnixMs), Date.parse('2026-11-28T02:00:00Z'));
    await apply(c, pool, KARGS, OS);
    const want = await target(c);
    await pause(1500);
    let node = await untilNode(c, [host], 'windowed', () => true);
    assert.equal(node.status!.staging ?? null, null, 'no download outside the download window');
    assert.deepEqual(calls(host).filter((l) => l.includes('--download-only')), []);

    // Wednesday 22:30: the download window is open, the maintenance window is not.
    clock.set(Date.parse('2026-11-25T22:30:00Z'));
    server.handle.controlPlane.resync();
    node = await untilNode(c, [host], 'windowed', (n) => n.status!.staging?.state === 'Staged');
    assert.equal(node.status!.staging!.config, want);
    assert.equal(calls(host).filter((l) => l.includes('--download-only')).length, 1);
    await pause(1500);
    node = await untilNode(c, [host], 'windowed', () => true);
    assert.equal(node.status!.currentConfig, first, 'staged, but not disrupted outside the maintenance window');
    assert.equal(host.reboots, rebootsBefore);

    // Saturday 02:30: the maintenance window opens; the apply comes from the cache.
    clock.set(Date.parse('2026-11-28T02:30:00Z'));
    server.handle.controlPlane.resync();
    node = await untilNode(c, [host], 'windowed', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
    assert.equal(node.status!.os?.bootedImage, IMAGE);
    assert.equal(host.reboots, rebootsBefore + 1);
    assert.deepEqual(calls(host).filter((l) => /^(rebase|update|override)\b/.test(l) && !l.includes('--download-only')), [`rebase --experimental ostree-unverified-registry:${IMAGE} -C`]);
  } finally {
    await host.stop();
    await server.close();
  }
});

function esc(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

test('maxStaging holds: with maxStaging 1, one node downloads at a time, and every node is still staged before it is disrupted', { skip }, async () => {
  const server = await startTestServer();
  const names = ['ms-a', 'ms-b', 'ms-c'];
  const hosts = names.map((name) => new SandboxHost({ name, server: server.address, pki: server.pki }));
  const pool = poolYaml('worker', '  maxUnavailable: 1\n  rollout: {maxStaging: 1}\n');
  let sampler: NodeJS.Timeout | undefined;
  try {
    const c = server.admin();
    await apply(c, pool, KARGS);
    const first = await target(c);
    await Promise.all(hosts.map((h) => h.start()));
    for (const name of names) await untilNode(c, hosts, name, (n) => n.status!.currentConfig === first && n.status!.state === 'Done');
    // mcctl's preview: who downloads now, who after the nodes ahead (maxStaging 1), and that each is disrupted once staged.
    const dir = mkdtempSync(join(tmpdir(), 'staging-preview-'));
    writeFileSync(join(dir, 'all.yaml'), [pool, KARGS, OS].join('\n---\n'));
    const dry = await runCliAsync(['apply', '--dry-run', '-f', join(dir, 'all.yaml')], { env: { MCPLANE_SERVER: server.address, MCPLANE_PKI_DIR: server.pki.dir } });
    assert.equal(dry.status, 0, dry.stderr);
    assert.match(dry.stdout, /NODE\s+POOL\s+ACTION\s+WHY\s+BATCH\s+WINDOW\s+STAGES\s+DISRUPTED\n/);
    const stages = names.map((name) => new RegExp(`^${name}\\s.*\\s(\\d)\\s+-\\s+(now|after \\d nodes? ahead staged)\\s+\\S+Z, once staged$`, 'm').exec(dry.stdout)?.slice(1, 3));
    assert.deepEqual(stages.map((m) => m?.[1]).sort(), ['after 1 node ahead staged', 'after 2 nodes ahead staged', 'now'], dry.stdout);
    // A slow image source: each download takes about 2 s.
    for (const h of hosts) {
      h.rpmOstree('standin-size', IMAGE, '2000000');
      h.rpmOstree('standin-rate', '1000000');
    }
    // Sampled from the stand-ins themselves: how many hosts run a download at once.
    let most = 0;
    const downloadingNow = (): number => hosts.filter((h) => {
      const t = (JSON.parse(readFileSync(h.standinState, 'utf8')) as { transaction?: { pid: number } }).transaction;
      if (!t) return false;
      try { process.kill(t.pid, 0); return true; } catch { return false; }
    }).length;
    sampler = setInterval(() => { try { most = Math.max(most, downloadingNow()); } catch { /* a state file mid-rename */ } }, 20);
    await apply(c, pool, KARGS, OS);
    const want = await target(c);
    for (const name of names) {
      const n = await untilNode(c, hosts, name, (x) => x.status!.currentConfig === want && x.status!.state === 'Done', 180_000);
      assert.equal(n.status!.staging?.state, 'Staged', `${name} staged before its update`);
      assert.equal(n.status!.staging?.config, want);
      assert.equal(Number(n.status!.staging?.bytesDone), 2000000, `${name}: the bytes the download reported`);
    }
    assert.equal(most, 1, 'one download at a time');
    for (const h of hosts) {
      const deploys = calls(h).filter((l) => /^(rebase|update|override)\b/.test(l) && !l.includes('--download-only'));
      assert.deepEqual(deploys, [`rebase --experimental ostree-unverified-registry:${IMAGE} -C`], `${h.options.name} applied from the cache`);
    }
  } finally {
    clearInterval(sampler);
    for (const h of hosts) await h.stop();
    await server.close();
  }
});

test('the disk check runs again right before the apply: a disk that filled up after staging fails the apply before rpm-ostree deploys, naming the file system and the sizes', { skip }, async () => {
  const clock = new ManualClock(Date.parse('2026-11-25T12:00:00Z'));
  const server = await startTestServer({ clock });
  const host = new SandboxHost({ name: 'filled', server: server.address, pki: server.pki });
  const pool = poolYaml('worker', '  maintenanceWindows:\n    - {schedule: "0 2 * * 6", duration: 4h, timeZone: UTC}\n');
  try {
    const c = server.admin();
    const first = await startOnFirst(c, host, pool);
    await apply(c, pool, KARGS, OS);
    const want = await target(c);
    await untilNode(c, [host], 'filled', (n) => n.status!.staging?.state === 'Staged' && n.status!.staging.config === want);
    // The disk fills up after the download: here, the floor rises past what any disk has (the agent restarts with it).
    await host.kill();
    const config = parse(readFileSync(host.configPath, 'utf8')) as Record<string, unknown>;
    writeFileSync(host.configPath, stringify({ ...config, staging: { minFreeDisk: '4Pi' } }));
    host.spawnAgent();
    clock.set(Date.parse('2026-11-28T02:30:00Z'));
    server.handle.controlPlane.resync();
    const node = await untilNode(c, [host], 'filled', (n) => n.status!.state === 'Degraded' || n.status!.state === 'RolledBack');
    const fs = join(host.root, 'sysroot');
    assert.match(node.status!.reason, new RegExp(`apply: disk: ${esc(fs)} has \\d+ bytes free; the apply of ${esc(want)} \\(content staged\\) \\(0 bytes\\) with staging.minFreeDisk \\(4503599627370496 bytes\\) kept free needs 4503599627370496 bytes free there`));
    assert.deepEqual(calls(host).filter((l) => /^(rebase|update|override)\b/.test(l) && !l.includes('--download-only')), [], 'rpm-ostree deployed nothing');
    assert.equal(node.status!.currentConfig, first);
  } finally {
    await host.stop();
    await server.close();
  }
});
