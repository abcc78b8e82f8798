// MCO's day-1 directories and links on a running host, by MCO's own rule (reconcile.go,
// isConfigReconcilable): a change to storage.directories is Unreconcilable with MCO's reason; a
// change to storage.links too, unless it removes them all, which is applied (and changes nothing
// on the host). Reverting the change brings the node back.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { sandboxFixture } from '../helpers/sandbox-fixture.ts';
import { untilNode } from '../helpers/converge.ts';
import { poolYaml } from '../helpers/manifests.ts';

let host: SandboxHost;

const pool = poolYaml('worker', `  disruptionPolicy:
    files: [{path: /etc/, actions: [{type: none}]}]
`);
const day1 = (dirs: string[], links: string[]) => JSON.stringify({
  apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig',
  metadata: { name: '98-day1', labels: { 'machineconfiguration.openshift.io/role': 'worker' } },
  spec: { config: { ignition: { version: '3.2.0' }, storage: {
    files: [{ path: '/etc/day1.conf', contents: { source: `data:,${dirs.length}-${links.length}` } }],
    directories: dirs.map((path) => ({ path, mode: 493 })),
    links: links.map((path) => ({ path, target: '/var/lib/examplecorp' })),
  } } },
});
const bed = sandboxFixture({ sharedSystemd: true, manifests: [pool], setUp: hostOnFirstConfig });
const { skip } = bed;
const apply = (text: string) => call(bed.c, bed.c.config.apply.bind(bed.c.config), { manifests: [{ source: 'day1.yaml', text }], dryRun: false }, 'apply');
const target = async () => (await call(bed.c, bed.c.status.getPool.bind(bed.c.status), { name: 'worker' }, 'get')).status!.configuration;
async function applyAndTarget(text: string): Promise<string> {
  const before = await target();
  await apply(text);
  for (;;) {
    const now = await target();
    if (now !== before) return now;
    await new Promise((r) => setTimeout(r, 25));
  }
}

// In the fixture's set-up, after the server, the manager and the pool (a file's before() hooks run
// side by side, so a second one could not wait for the first).
async function hostOnFirstConfig(): Promise<void> {
  await apply(day1(['/var/lib/examplecorp'], ['/etc/examplecorp-link']));
  host = new SandboxHost({ name: 'day1', server: bed.server.address, pki: bed.server.pki, systemd: bed.systemd });
  bed.hosts.push(host);
  await host.start();
  const want = await target();
  await untilNode(bed.c, [host], 'day1', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
}

test('a change to storage.directories is Unreconcilable with MCO\'s reason; reverting it brings the node back', { skip }, async () => {
  const good = await target();
  const want = await applyAndTarget(day1(['/var/lib/examplecorp', '/var/lib/other'], ['/etc/examplecorp-link']));
  const node = await untilNode(bed.c, [host], 'day1', (n) => n.status!.state === 'Unreconcilable' && n.status!.desiredConfig === want, 20_000);
  assert.equal(node.status!.phase, 'check');
  assert.match(node.status!.reason, /^check: spec\.config\.storage\.directories: ignition directories section contains changes; /);
  assert.equal(host.file('etc/day1.conf'), '1-1', 'nothing of it was applied');
  assert.equal(await applyAndTarget(day1(['/var/lib/examplecorp'], ['/etc/examplecorp-link'])), good);
  await untilNode(bed.c, [host], 'day1', (n) => n.status!.currentConfig === good && n.status!.state === 'Done', 20_000);
});

test('removing every link is applied, as MCO allows; adding one back is Unreconcilable with MCO\'s reason', { skip }, async () => {
  const none = await applyAndTarget(day1(['/var/lib/examplecorp'], []));
  await untilNode(bed.c, [host], 'day1', (n) => n.status!.currentConfig === none && n.status!.state === 'Done', 20_000);
  assert.equal(host.file('etc/day1.conf'), '1-0');
  const want = await applyAndTarget(day1(['/var/lib/examplecorp'], ['/etc/examplecorp-link']));
  const node = await untilNode(bed.c, [host], 'day1', (n) => n.status!.state === 'Unreconcilable' && n.status!.desiredConfig === want, 20_000);
  assert.match(node.status!.reason, /^check: spec\.config\.storage\.links: ignition links section contains changes; /);
});
