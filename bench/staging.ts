// Staging before the drain (issue 32), measured: a pool of 4 real agents under sandbox hosts
// (real systemd user managers, the rpm-ostree and reboot stand-ins), the real server with the
// Kubernetes API stand-in (so each node is cordoned and drained for real), maxUnavailable 1, and
// a slow image source: the rpm-ostree stand-in's rate limit (standin-rate) on an image of a set
// size, which every download of it takes size/rate seconds.
//
// Two rollouts of a new OS image, one after the other on the same pool:
//   before  spec.rollout.staging: Disabled: each node downloads during its update, drained
//   after   staging Enabled (the default): each node downloads while it serves, then the update
//           applies from rpm-ostree's cache
// Per node: the time its Kubernetes Node was unschedulable (cordoned), and the time it counted
// against maxUnavailable (handed the config and not yet Done on it); and the whole rollout's time.
//
// BENCH_IMAGE_BYTES (default 1e9) and BENCH_RATE (bytes/s, default 3.3e7: about 30 s per download, a
// rack's shared link) set the source.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { startKubeApiStandIn, type KubeApiStandIn } from '../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { SandboxHost } from '../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../sandbox/user-systemd.ts';
import { call } from '../src/cli/client/call.ts';
import type { Clients } from '../src/cli/client/connection.ts';
import { addNode } from '../test/helpers/kube-workloads.ts';
import { mcYaml, poolYaml } from '../test/helpers/manifests.ts';
import { startTestServer } from '../test/helpers/test-server.ts';

const NODES = ['bench-a', 'bench-b', 'bench-c', 'bench-d'];
const IMAGE_BYTES = Number(process.env.BENCH_IMAGE_BYTES ?? 1e9);
const RATE = Number(process.env.BENCH_RATE ?? 3.3e7);
const KARGS = mcYaml('50-kargs', 'worker', '  kernelArguments: [bench=1]\n');
const image = (tag: string): string => `quay.io/example/bench-os:${tag}`;

interface Figures {
  /** Per node: ms cordoned, ms counted unavailable. */
  nodes: Map<string, { unschedulableMs: number; unavailableMs: number }>;
  rolloutMs: number;
}

export async function run(): Promise<void> {
  if (!canRunUserSystemd()) {
    console.log('staging: skipped (needs root to start systemd user managers in private mount namespaces)');
    return;
  }
  const standIn = await startKubeApiStandIn({ timeScale: 0.01 });
  for (const n of NODES) addNode(standIn, n, { 'node-role.kubernetes.io/worker': '' });
  const kubeconfig = standIn.writeKubeconfig(mkdtempSync(join(tmpdir(), 'bench-staging-')));
  const server = await startTestServer({ kubernetes: { kubeconfig }, drain: { retryBaseMs: 150, retryMaxMs: 600, pollMs: 50 } });
  const hosts = NODES.map((name) => new SandboxHost({ name, server: server.address, pki: server.pki }));
  try {
    const c = server.admin();
    const pool = (staging: 'Enabled' | 'Disabled'): string => poolYaml('worker', `  maxUnavailable: 1\n  rollout: {staging: ${staging}, maxFailures: 4}\n`);
    await apply(c, pool('Enabled'), KARGS);
    await Promise.all(hosts.map((h) => h.start()));
    await rollout(c, hosts, standIn, await target(c));
    for (const h of hosts) {
      for (const tag of ['before', 'after']) h.rpmOstree('standin-size', image(tag), String(IMAGE_BYTES));
      h.rpmOstree('standin-rate', String(RATE));
    }
    console.log(`staging: pool of ${NODES.length}, maxUnavailable 1, an image of ${(IMAGE_BYTES / 1e9).toFixed(2)} GB at ${(RATE / 1e6).toFixed(0)} MB/s (${(IMAGE_BYTES / RATE).toFixed(1)} s per download, the rpm-ostree stand-in's rate limit)`);
    const figures: Record<string, Figures> = {};
    for (const [label, staging] of [['before', 'Disabled'], ['after', 'Enabled']] as const) {
      await apply(c, pool(staging), KARGS, mcYaml('60-os', 'worker', `  osImageURL: ${image(label)}\n`));
      figures[label] = await rollout(c, hosts, standIn, await target(c));
    }
    const s = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
    const rows = [['node', 'unschedulable before', 'after', 'unavailable before', 'after']];
    for (const n of NODES) {
      const b = figures.before!.nodes.get(n)!;
      const a = figures.after!.nodes.get(n)!;
      rows.push([n, s(b.unschedulableMs), s(a.unschedulableMs), s(b.unavailableMs), s(a.unavailableMs)]);
    }
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
    for (const r of rows) console.log('  ' + r.map((x, i) => x.padEnd(widths[i]!)).join('  '));
    const mean = (label: string, key: 'unschedulableMs' | 'unavailableMs'): number => [...figures[label]!.nodes.values()].reduce((t, x) => t + x[key], 0) / NODES.length;
    console.log(`  mean unschedulable: ${s(mean('before', 'unschedulableMs'))} -> ${s(mean('after', 'unschedulableMs'))}; mean unavailable: ${s(mean('before', 'unavailableMs'))} -> ${s(mean('after', 'unavailableMs'))}`);
    console.log(`  whole rollout: ${s(figures.before!.rolloutMs)} -> ${s(figures.after!.rolloutMs)} (expected saving about nodes/maxUnavailable x download = ${s((NODES.length * IMAGE_BYTES * 1000) / RATE)}, less the first node's download, which staging cannot hide)`);
  } finally {
    for (const h of hosts) await h.stop();
    await server.close();
    await standIn.close();
  }
}

const apply = (c: Clients, ...texts: string[]) => call(c, c.config.apply.bind(c.config), { manifests: texts.map((text, i) => ({ source: `m${i}.yaml`, text })), dryRun: false }, 'apply');
const target = async (c: Clients): Promise<string> => (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.configuration;

/** Until every node is Done on `want`, sampling every 50 ms what each node costs meanwhile. */
async function rollout(c: Clients, hosts: SandboxHost[], standIn: KubeApiStandIn, want: string): Promise<Figures> {
  const start = performance.now();
  const nodes = new Map(NODES.map((n) => [n, { unschedulableMs: 0, unavailableMs: 0 }]));
  let last = start;
  for (;;) {
    for (const h of hosts) await h.rebootIfRequested();
    const list = (await call(c, c.status.listNodes.bind(c.status), { pool: '', limit: 0, continueToken: '' }, 'list nodes')).nodes;
    const now = performance.now();
    const dt = now - last;
    last = now;
    let done = 0;
    for (const n of list) {
      const f = nodes.get(n.name);
      if (!f) continue;
      const onTarget = n.status!.currentConfig === want && n.status!.state === 'Done';
      if (onTarget) done++;
      if (n.status!.desiredConfig === want && !onTarget) f.unavailableMs += dt;
      if ((standIn.get('Node', n.name) as unknown as { spec?: { unschedulable?: boolean } }).spec?.unschedulable) f.unschedulableMs += dt;
    }
    if (done === NODES.length) return { nodes, rolloutMs: now - start };
    if (now - start > 30 * 60_000) throw new Error(`the rollout to ${want} did not finish within 30 minutes`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
