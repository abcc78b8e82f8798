// Drift of a file only root may read (mode 0600) names no hash of it anywhere: a 12-hex prefix
// of sha256 in mcd_state's reason (which any local user can scrape), the agent's log, the node's
// status or the cluster's events lets whoever guesses the secret confirm the guess. A real agent
// on a sandboxed host (real systemd user manager) and a real server over loopback mTLS.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { sandboxFixture } from '../helpers/sandbox-fixture.ts';
import { untilNode } from '../helpers/converge.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { parsePrometheusText, samples } from '../helpers/prometheus-text.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { eventually } from '../helpers/simulated-agent.ts';

const NODE = 'secret-drift';
const SECRET = 'hunter2-the-token';
const EDITED = 'guessed-token';
const PUBLIC = 'motd for everyone';

const pool = poolYaml('secret', `  disruptionPolicy:
    files: [{path: /etc/, actions: [{type: none}]}]
`);
const config = mcYaml('50-secret', 'secret', `  config:
    ignition: {version: 3.4.0}
    storage:
      files:
        - {path: /etc/token, mode: 0600, contents: {source: "data:,${SECRET}"}}
        - {path: /etc/motd, mode: 0644, contents: {source: "data:,${encodeURIComponent(PUBLIC)}"}}
`);

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** Every 8-character window of the hashes that text shows, so a prefix or any slice is caught. */
function leakedHex(text: string, hashes: string[]): string[] {
  const found = new Set<string>();
  for (const h of hashes) for (let i = 0; i + 8 <= h.length; i++) if (text.toLowerCase().includes(h.slice(i, i + 8))) found.add(h.slice(i, i + 8));
  return [...found];
}

const bed = sandboxFixture({ sharedSystemd: true, manifests: [pool, config] });
const { skip, hosts } = bed;

test('a 0600 file that drifts: Degraded, naming the file and its mode, with no hash of it in /metrics, the log, the node status or the events', { skip }, async () => {
  const host = new SandboxHost({ name: NODE, server: bed.server.address, pki: bed.server.pki, pool: 'secret', systemd: bed.systemd, labels: { 'node-role.kubernetes.io/secret': '' } });
  hosts.push(host);
  await host.start();
  const want = (await call(bed.c, bed.c.status.getPool.bind(bed.c.status), { name: 'secret' }, 'get')).status!.configuration;
  await untilNode(bed.c, [host], NODE, (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.equal(host.file('etc/token'), SECRET);

  writeFileSync(join(host.root, 'etc/token'), EDITED); // keeps its mode 0600
  const hashes = [sha256(SECRET), sha256(EDITED)];
  const node = await untilNode(bed.c, [host], NODE, (n) => n.status!.state === 'Degraded', 10_000);

  let metrics = '';
  await eventually(async () => {
    metrics = await (await fetch(host.metricsUrl()!)).text();
    return samples(parsePrometheusText(metrics), 'mcd_state')[0]?.labels.state === 'Degraded';
  }, 10_000, 'mcd_state Degraded');
  assert.match(samples(parsePrometheusText(metrics), 'mcd_state')[0]!.labels.reason!, /\/etc\/token/);
  assert.deepEqual(leakedHex(metrics, hashes), [], 'no hash of the secret in /metrics');
  assert.ok(host.logs.some((l) => l.includes('managed files changed outside the agent') && l.includes('/etc/token')), 'the drift is logged');
  assert.deepEqual(leakedHex(host.logs.join('\n'), hashes), [], 'no hash of the secret in the agent\'s log');
  assert.deepEqual(leakedHex(JSON.stringify(node.status), hashes), [], 'no hash of the secret in the node status');
  // The leader's event pass follows the status by up to a second: wait for its Warnings, or the
  // check for hashes below would pass on an empty list.
  await eventually(async () => {
    const { events } = await call(bed.c, bed.c.status.listEvents.bind(bed.c.status), { node: NODE, pool: '', limit: 0 }, 'events');
    return ['DriftDetected', 'Degraded'].every((reason) => events.some((e) => e.reason === reason && e.message.includes('/etc/token')));
  }, 10_000, 'DriftDetected and Degraded events naming /etc/token');
  const events = await runCliAsync(['get', 'events', '--node', NODE, '-o', 'json', '-s', bed.server.address, '--pki-dir', bed.server.pki.dir]);
  assert.equal(events.status, 0, events.stderr);
  assert.match(events.stdout, /\/etc\/token/);
  assert.deepEqual(leakedHex(events.stdout, hashes), [], 'no hash of the secret in the events');
  // What it says instead: the file, that its content differs, and why no hash is shown.
  assert.equal(node.status!.reason, 'drift: file /etc/token changed outside the agent: content differs from the config (file mode 0600: hashes withheld)');
  assert.deepEqual(node.status!.drift.map((d) => [d.path, d.expectedHash, d.actualHash]), [['/etc/token', 'withheld (0600)', 'withheld (0600)']]);

  // Made readable by all: the mode is what it names.
  await call(bed.c, bed.c.config.reapplyNode.bind(bed.c.config), { name: NODE }, 'reapply');
  await untilNode(bed.c, [host], NODE, (n) => n.status!.state === 'Done' && n.status!.drift.length === 0, 10_000);
  chmodSync(join(host.root, 'etc/token'), 0o644);
  const opened = await untilNode(bed.c, [host], NODE, (n) => n.status!.state === 'Degraded', 10_000);
  assert.equal(opened.status!.reason, 'drift: file /etc/token changed outside the agent: file mode 0644 instead of 0600 (hashes withheld)');
  assert.deepEqual(leakedHex(JSON.stringify(opened.status), [sha256(SECRET)]), []);

  // A file everyone may read keeps its hashes: they tell an operator which version is on disk.
  await call(bed.c, bed.c.config.reapplyNode.bind(bed.c.config), { name: NODE }, 'reapply');
  await untilNode(bed.c, [host], NODE, (n) => n.status!.state === 'Done' && n.status!.drift.length === 0, 10_000);
  writeFileSync(join(host.root, 'etc/motd'), 'edited by hand');
  const drifted = await untilNode(bed.c, [host], NODE, (n) => n.status!.state === 'Degraded', 10_000);
  assert.equal(drifted.status!.reason, `drift: file /etc/motd changed outside the agent (expected sha256 ${sha256(PUBLIC).slice(0, 12)}, found ${sha256('edited by hand').slice(0, 12)})`);
});
