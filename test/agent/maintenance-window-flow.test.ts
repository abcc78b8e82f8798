// A reboot waits for the pool's maintenance window, on a real agent: the control plane's clock is
// a ManualClock the test moves; the preview, the pool's Updating condition and `mcctl get pools
// -o wide` say when the window opens; once it does, the node reboots (reboot stand-in).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { describeCommand, getCommand } from '../../src/cli/commands/read.ts';
import { ManualClock } from '../../src/controlplane/replica/clock.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { untilNode } from '../helpers/converge.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let server: TestServer;
let c: Clients;
let host: SandboxHost;
// Sunday 2026-11-22 10:00 UTC; the window: Saturdays 02:00-06:00 in Berlin (01:00Z in winter).
const clock = new ManualClock(Date.parse('2026-11-22T10:00:00Z'));

const pool = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: worker}
spec:
  machineConfigSelector: {matchLabels: {machineconfiguration.openshift.io/role: worker}}
  nodeSelector: {matchLabels: {node-role.kubernetes.io/worker: ""}}
  maintenanceWindows:
    - {schedule: "0 2 * * 6", duration: 4h, timeZone: Europe/Berlin}
`;
const kargs = (k: string) => `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 50-kargs, labels: {machineconfiguration.openshift.io/role: worker}}
spec:
  kernelArguments: [${k}]
`;

before(async () => {
  if (skip) return;
  server = await startTestServer({ clock });
  c = server.admin();
  host = new SandboxHost({ name: 'w1', server: server.address, pki: server.pki });
});
after(async () => {
  if (skip) return;
  await host?.stop();
  await server?.close();
});
const apply = (text: string, dryRun = false) => call(c, c.config.apply.bind(c.config), { manifests: [{ source: 't.yaml', text }], dryRun }, 'apply');
const getPool = () => call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');

test('a reboot waits for the window; the pool says until when; it goes once the window opens', { skip }, async () => {
  await apply(pool);
  await apply(kargs('a=1'));
  await host.start();
  // A new host gets its first config at once, window or not: it serves nothing yet.
  const first = (await getPool()).status!.configuration;
  await untilNode(c, [host], 'w1', (n) => n.status!.currentConfig === first && n.status!.state === 'Done');
  const rebootsBefore = host.reboots; // the first config's karg rebooted it once already

  const preview = await apply(kargs('a=2'), true);
  assert.deepEqual(preview.nodePreviews.map((n) => [n.node, n.action, n.batch, n.window]), [['w1', 'reboot', 1, '2026-11-28T01:00Z (in 5d15h)']]);
  await apply(kargs('a=2'));
  const want = (await getPool()).status!.configuration;
  let p = await getPool();
  for (let i = 0; i < 100 && p.status!.conditions.find((x) => x.type === 'Updating')?.reason !== 'WaitingForMaintenanceWindow'; i++) {
    await new Promise((r) => setTimeout(r, 50));
    p = await getPool();
  }
  const updating = p.status!.conditions.find((x) => x.type === 'Updating')!;
  assert.equal(updating.status, 'False');
  assert.equal(updating.message, `0 of 1 nodes updated to ${want}; 1 node waits for the next maintenance window to drain or reboot (w1): it opens at 2026-11-28T01:00Z, in 5d15h`);
  assert.equal(p.status!.maintenanceWindow, 'next 2026-11-28T01:00Z (in 5d15h)');
  let out = '';
  await getCommand(c, { out: (t) => { out += t; }, err: () => {} }, ['pools', 'worker'], { format: { kind: 'wide' }, headers: true, watch: false });
  if (process.env.SHOW_PREVIEW) process.stdout.write(out);
  assert.match(out, /WINDOW\n/);
  assert.match(out, /next 2026-11-28T01:00Z \(in 5d15h\)\n$/);
  const described = await describeCommand(c, 'pool', 'worker');
  if (process.env.SHOW_PREVIEW) process.stdout.write(described);
  assert.match(described, /^Maintenance Windows: +"0 2 \* \* 6" for 4h \(Europe\/Berlin\); drains and reboots wait: next 2026-11-28T01:00Z \(in 5d15h\)$/m);
  assert.match(described, /Updating\s+False\s+WaitingForMaintenanceWindow\s+\S+\s+0 of 1 nodes updated .* it opens at 2026-11-28T01:00Z, in 5d15h/);
  assert.equal((await call(c, c.status.getNode.bind(c.status), { name: 'w1' }, 'get')).status!.currentConfig, first, 'no reboot before the window');
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(host.reboots, rebootsBefore, 'no reboot before the window');

  // Saturday 01:30Z = 02:30 in Berlin: the window is open.
  clock.set(Date.parse('2026-11-28T01:30:00Z'));
  server.handle.controlPlane.resync();
  const node = await untilNode(c, [host], 'w1', (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  assert.match(node.status!.lastDisruption, /^reboot: kernelArguments changed$/);
  assert.equal(host.reboots, rebootsBefore + 1);
  // Pool status is its own controller, paced while the lane is busy: it may follow the node's report by a pass.
  await eventually(async () => (await getPool()).status!.maintenanceWindow === 'open until 2026-11-28T05:00Z', 5_000, 'pool status says the window is open');
});
