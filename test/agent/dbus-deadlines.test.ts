// Every D-Bus call has a deadline and a lost bus is re-established: against a real systemd user
// manager that is frozen (SIGSTOP: the bus is up, systemd answers nothing) and then killed with
// its bus in the middle of an update. The node must report Degraded naming the step, the object
// and the cause within seconds, never "Working, apply" forever, and the next update must work
// on a new connection.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from '../helpers/converge.ts';
import { poolYaml } from '../helpers/manifests.ts';
import { sandboxFixture, skipWithoutUserSystemd } from '../helpers/sandbox-fixture.ts';

let host: SandboxHost;

const pool = poolYaml('worker', `  maxUnavailable: 100%
  disruptionPolicy:
    files: [{path: /etc/, actions: [{type: none}]}]
    units: [{name: slow.service, actions: [{type: restart, unit: slow.service}]}]
`);
const config = (round: number, exec: string) => `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 50-slow, labels: {machineconfiguration.openshift.io/role: worker}}
spec:
  config:
    ignition: {version: 3.4.0}
    storage: {files: [{path: /etc/round, contents: {source: "data:,${round}"}}]}
    systemd:
      units:
        - name: slow.service
          contents: "[Service]\\nType=oneshot\\nRemainAfterExit=yes\\nExecStart=${exec}\\n"
`;
const apply = async (text: string) => {
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'c', text }], dryRun: false }, 'apply');
  return (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
};

// Registered before the fixture's after(), so it starts first (and, synchronous, is done before the
// fixture's stop begins): a manager left frozen by a failed test would otherwise hold that stop.
after(() => { if (!skipWithoutUserSystemd) systemd.thaw(); });
const { skip, server, c, systemd, hosts } = sandboxFixture({ sharedSystemd: true, manifests: [pool], setUp: hostOnFirstConfig });

// In the fixture's set-up, after the server, the manager and the pool (a file's before() hooks run
// side by side, so a second one could not wait for the first).
async function hostOnFirstConfig(): Promise<void> {
  // Job timeout and step deadline far above the D-Bus call deadline: only that may answer.
  host = new SandboxHost({ name: 'dbus', server: server.address, pki: server.pki, systemd, config: { dbusTimeoutSeconds: 2, jobTimeoutSeconds: 120, stepTimeoutSeconds: 300 } });
  hosts.push(host);
  const first = await apply(config(1, '/bin/true'));
  await host.start();
  await untilNode(c, [host], 'dbus', (n) => n.status!.currentConfig === first && n.status!.state === 'Done');
}

test('systemd frozen during an update: Degraded within seconds naming the step, the call and the deadline; the next update works', { skip }, async () => {
  systemd.freeze();
  const start = Date.now();
  await apply(config(2, '/bin/true -2'));
  let node;
  try {
    node = await untilNode(c, [host], 'dbus', (n) => n.status!.state === 'Degraded', 15_000);
  } finally {
    systemd.thaw();
  }
  assert.ok(Date.now() - start < 15_000);
  assert.equal(node.status!.phase, 'apply');
  assert.match(node.status!.reason, /^apply: systemd daemon-reload: Reload\(\): no reply from systemd within 2s$/);
  const next = await apply(config(3, '/bin/true -3'));
  await untilNode(c, [host], 'dbus', (n) => n.status!.currentConfig === next && n.status!.state === 'Done', 20_000);
});

test('systemd and its bus killed while the agent waits on a job: Degraded naming the unit and the lost connection; a new manager is reconnected to', { skip }, async () => {
  await apply(config(4, '/bin/sleep 600'));
  await untilNode(c, [host], 'dbus', (n) => n.status!.state === 'Working' && n.status!.phase === 'actions', 20_000);
  await new Promise((r) => setTimeout(r, 300)); // the restart job is running
  const start = Date.now();
  await systemd.crash();
  const node = await untilNode(c, [host], 'dbus', (n) => n.status!.state === 'Degraded', 15_000);
  assert.ok(Date.now() - start < 15_000, 'not after the 120 s job timeout');
  assert.equal(node.status!.phase, 'actions');
  assert.match(node.status!.reason, /^actions: unit slow\.service: RestartUnit slow\.service: the D-Bus connection to systemd was lost while waiting for the job \(.+\); the job's outcome is unknown/);

  await systemd.restart();
  const next = await apply(config(5, '/bin/true -5'));
  await untilNode(c, [host], 'dbus', (n) => n.status!.currentConfig === next && n.status!.state === 'Done', 30_000);
  assert.equal(systemd.systemctl('is-active', 'slow.service').stdout.trim(), 'active', 'the new manager ran the unit the agent restarted');
});
