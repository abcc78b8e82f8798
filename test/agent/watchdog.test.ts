// The systemd watchdog is fed only while the update loop is healthy. The agent runs as a real
// Type=notify service (WatchdogSec, Restart=on-failure) under a systemd user manager; the
// rpm-ostree stand-in is told to hang on its next staging command, as a wedged rpm-ostreed
// would. The update must go Degraded at its step deadline naming the step, the object and the
// cause, and, since the hung command never returns, systemd must restart the agent.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from '../helpers/converge.ts';
import { installAgentUnit } from '../helpers/agent-unit.ts';
import { programArgs } from '../helpers/run-cli.ts';
import { canRunUserSystemd, startUserSystemd, type UserSystemd } from '../../sandbox/user-systemd.ts';
import { poolYaml } from '../helpers/manifests.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';
import { scaled } from '../helpers/time-scale.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let server: TestServer;
let c: Clients;
let systemd: UserSystemd;
const UNIT = 'mcplane-agent-watchdog.service';

const config = (kargs: string) => `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 50-wd, labels: {machineconfiguration.openshift.io/role: worker}}
spec:
  kernelArguments: [${kargs}]
  config:
    ignition: {version: 3.4.0}
`;
const apply = async (text: string) => {
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'c', text }], dryRun: false }, 'apply');
  return (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
};
const show = (prop: string) => systemd.systemctl('show', '-p', prop, '--value', UNIT).stdout.trim();

before(async () => {
  if (skip) return;
  server = await startTestServer();
  c = server.admin();
  systemd = await startUserSystemd();
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'p', text: poolYaml('worker', '  maxUnavailable: 100%\n') }], dryRun: false }, 'apply');
});
after(async () => {
  if (skip) return;
  systemd.systemctl('stop', UNIT);
  await systemd.stop();
  await server.close();
});

test('an update stuck past its step deadline: Degraded naming step, object and cause; the watchdog starves and systemd restarts the agent', { skip, timeout: scaled(120_000) }, async () => {
  const host = new SandboxHost({ name: 'wd', server: server.address, pki: server.pki, systemd, config: { stepTimeoutSeconds: 2, rpmOstreeTimeoutSeconds: 600 } });
  const first = await apply(config('wd=0'));
  await host.start();
  await untilNode(c, [host], 'wd', (n) => n.status!.currentConfig === first && n.status!.state === 'Done');
  await host.kill(); // keep its config and journal; systemd runs the agent from here on
  installAgentUnit(systemd, host, UNIT, { description: 'mcplane agent under test', program: [process.execPath, ...programArgs('mcplane-agent')], service: ['WatchdogSec=4'] });
  const start = systemd.systemctl('start', UNIT);
  assert.equal(start.status, 0, start.stderr);
  assert.equal(show('NRestarts'), '0');

  host.rpmOstree('standin-hang', '1');
  await apply(config('wd=1'));
  const log = () => readFileSync(join(host.dir, 'agent.log'), 'utf8');
  const node = await untilNode(c, [], 'wd', (n) => n.status!.state === 'Degraded', 20_000).catch((err) => { throw new Error(`${err.message}\n${log()}`); });
  assert.equal(node.status!.phase, 'apply');
  assert.equal(node.status!.reason, 'apply: rpm-ostree: did not finish within 2s (stepTimeoutSeconds)');

  // The hung rpm-ostree never returns: the watchdog starves and systemd restarts the agent.
  const deadline = Date.now() + 30_000;
  while (show('NRestarts') === '0') {
    if (Date.now() > deadline) throw new Error(`systemd did not restart the agent: ${systemd.systemctl('status', UNIT).stdout}\n${log()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(show('NRestarts'), '1');
  assert.match(log(), /"stuck":"apply: rpm-ostree: gave up after 2s \(stepTimeoutSeconds\) and it has not returned since","msg":"the update loop is stuck past its deadline; no longer feeding the systemd watchdog/);
  // The fresh agent is ready and takes the update again; rpm-ostree answers now, so it goes on
  // to the reboot the kernel argument needs.
  await untilNode(c, [], 'wd', (n) => n.status!.state === 'Working' && n.status!.phase === 'reboot', 20_000);
  assert.equal(show('ActiveState'), 'active');
  assert.equal(log().match(/"msg":"mcplane-agent started"/g)!.length, 2);
});
