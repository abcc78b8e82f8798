// Reconnects with backoff and a full re-report; every shared example applied by real agents
// until their pools are Updated; the agent as a Type=notify service under systemd.

import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode, untilPoolUpdated } from '../helpers/converge.ts';
import { REPO_ROOT } from '../helpers/run-cli.ts';
import { canRunUserSystemd, startUserSystemd, type UserSystemd } from '../../sandbox/user-systemd.ts';
import { startTestServer } from '../helpers/test-server.ts';
import { eventually } from '../helpers/simulated-agent.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let systemd: UserSystemd;
before(async () => { if (!skip) systemd = await startUserSystemd(); });
after(async () => { if (!skip) await systemd.stop(); });

test('the server goes away: the agent retries with backoff, applies nothing meanwhile, and re-reports everything on reconnect', { skip }, async () => {
  let server = await startTestServer();
  const dataDir = server.dataDir;
  const port = server.handle.grpcPort;
  let c = server.admin();
  const host = new SandboxHost({ name: 'reconnect', server: server.address, pki: server.pki, systemd });
  await host.start();
  const first = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  await untilNode(c, [host], 'reconnect', (n) => n.status!.currentConfig === first && n.status!.state === 'Done');
  await server.close();
  // Waits for the agent to say it lost the stream, rather than a fixed 1.5 s.
  await eventually(() => host.logs.some((l) => l.includes('control plane stream lost; reconnecting')), 10_000, 'the agent noticing its server gone');
  assert.ok(host.alive, 'the agent keeps running without its server');

  // Same data, same port: the agent finds it again on its own.
  server = await startTestServer({ dataDir, listen: `127.0.0.1:${port}` });
  c = server.admin();
  const node = await untilNode(c, [host], 'reconnect', (n) => n.status!.connected === true, 30_000);
  assert.equal(node.status!.currentConfig, first);
  assert.equal(node.status!.os!.kernelType, 'default', 'the OS status came back with the re-registration');
  assert.equal(host.logs.filter((l) => l.includes('"update started"')).length, 1, 'nothing was applied while disconnected');
  await host.kill();
  await server.close();
});

test('every shared example, applied by agents on temporary roots, until the pools are Updated', { skip, timeout: 240_000 }, async () => {
  const server = await startTestServer();
  const c = server.admin();
  const shared = join(REPO_ROOT, '..', 'shared', 'examples');
  const dir = existsSync(shared) ? shared : join(REPO_ROOT, 'examples');
  const manifests = readdirSync(dir).filter((f) => f.endsWith('.yaml')).map((f) => ({ source: f, text: readFileSync(join(dir, f), 'utf8') }));
  await call(c, c.config.apply.bind(c.config), { manifests, dryRun: false }, 'apply');
  const hosts = [
    new SandboxHost({ name: 'ex-worker', server: server.address, pki: server.pki, systemd, labels: { 'node-role.kubernetes.io/worker': '' } }),
    new SandboxHost({ name: 'ex-infra', server: server.address, pki: server.pki, pool: 'infra', systemd, labels: { 'node-role.kubernetes.io/worker': '', 'node-role.kubernetes.io/infra': '' } }),
    new SandboxHost({ name: 'ex-master', server: server.address, pki: server.pki, pool: 'master', systemd, labels: { 'node-role.kubernetes.io/master': '' } }),
  ];
  for (const h of hosts) await h.start();
  for (const pool of ['worker', 'infra', 'master']) await untilPoolUpdated(c, hosts, pool, 1);
  const [worker, infra, master] = hosts as [SandboxHost, SandboxHost, SandboxHost];

  // 50-examplecorp-chrony: three server lines, and a reboot (a file no policy covers).
  assert.equal(worker.file('etc/chrony.conf')!.trim().split('\n').length, 3);
  assert.ok(worker.reboots >= 1);
  // 99-kubeinit-extra-config-worker: /usr/local resolves into /var on these hosts; mode 0755.
  const { statSync } = await import('node:fs');
  assert.equal(statSync(join(worker.root, 'var/usrlocal/bin/kubeinit_kubevirt_extra_config_script')).mode & 0o777, 0o755);
  // 05-worker-kernelarg-selinuxoff, 99-worker-realtime, 99-master-kargs-hugepage.
  const os = async (name: string) => (await call(c, c.status.getNode.bind(c.status), { name }, 'get')).status!.os!;
  assert.ok((await os('ex-worker')).kernelArguments.includes('selinux=0'));
  assert.equal((await os('ex-worker')).kernelType, 'realtime');
  assert.deepEqual((await os('ex-master')).kernelArguments.slice(-3), ['default_hugepagesz=1G', 'hugepagesz=1G', 'hugepages=32']);
  // infra: every worker config plus /etc/testinfra; the worker+infra node is in infra only.
  assert.equal(infra.file('etc/testinfra'), 'test');
  assert.equal(worker.file('etc/testinfra'), undefined);
  assert.equal((await call(c, c.status.getNode.bind(c.status), { name: 'ex-infra' }, 'get')).pool, 'infra');
  assert.equal(master.file('etc/chrony.conf'), undefined);

  // Removing the selinux=0 config deletes the karg again.
  await call(c, c.config.delete.bind(c.config), { kind: 'MachineConfig', name: '05-worker-kernelarg-selinuxoff' }, 'delete');
  await untilPoolUpdated(c, hosts, 'worker', 1);
  assert.ok(!(await os('ex-worker')).kernelArguments.includes('selinux=0'));
  for (const h of hosts) await h.kill();
  await server.close();
});

test('as a Type=notify service: systemd sees it ready, with a status line and watchdog', { skip }, async () => {
  const server = await startTestServer();
  const host = new SandboxHost({ name: 'notify-node', server: server.address, pki: server.pki, systemd });
  await host.start();
  await host.kill(); // keep its config; systemd runs the agent from here on
  writeFileSync(join(systemd.unitDir, 'mcplane-agent-test.service'), `[Unit]
Description=mcplane agent under test
[Service]
Type=notify
NotifyAccess=all
WatchdogSec=30
Restart=on-failure
WorkingDirectory=${REPO_ROOT}
ExecStart=${process.execPath} --import tsx src/agent/main.ts --config ${host.configPath}
`);
  assert.equal(systemd.systemctl('daemon-reload').status, 0);
  const start = systemd.systemctl('start', 'mcplane-agent-test.service');
  assert.equal(start.status, 0, start.stderr);
  const show = systemd.systemctl('show', '-p', 'ActiveState,SubState,StatusText,WatchdogUSec', 'mcplane-agent-test.service').stdout;
  assert.match(show, /ActiveState=active/);
  assert.match(show, /SubState=running/);
  assert.match(show, /StatusText=node notify-node, server 127\.0\.0\.1:\d+/);
  assert.match(show, /WatchdogUSec=30s/);
  systemd.systemctl('stop', 'mcplane-agent-test.service');
  await server.close();
});
