// mcctl against a real server, run as a separate process the way an operator runs it.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { parse } from 'yaml';
import { identityOf } from '../../src/runtime/pki.ts';
import { REPO_ROOT, runCliAsync } from '../helpers/run-cli.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

let agent: SimulatedAgent;
const { server, agents, conn } = serverFixture({}, async () => {
  agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('cli-node'), name: 'cli-node', autoDone: true, labels: { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': 'z1' } });
  agents.push(agent);
  await agent.connect();
});

const mcctl = (...args: string[]) => runCliAsync([...conn, ...args]);

test('apply -f prints one line per object, like kubectl', async () => {
  const r = await mcctl('apply', '-f', 'examples');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^machineconfig\/05-worker-kernelarg-selinuxoff created$/m);
  assert.match(r.stdout, /^machineconfigpool\/infra created$/m);
  const again = await mcctl('apply', '-f', 'examples/50-infra.yaml', '--dry-run');
  assert.equal(again.stdout, 'machineconfig/50-infra unchanged (dry run)\n');
});

test('get pools prints the columns of oc get mcp', async () => {
  const r = await mcctl('get', 'pools');
  assert.equal(r.status, 0, r.stderr);
  const [header, ...rows] = r.stdout.trimEnd().split('\n');
  assert.deepEqual(header!.split(/\s+/), ['NAME', 'CONFIG', 'UPDATED', 'UPDATING', 'DEGRADED', 'MACHINECOUNT', 'READYMACHINECOUNT', 'UPDATEDMACHINECOUNT', 'DEGRADEDMACHINECOUNT', 'AGE']);
  assert.deepEqual(rows.map((row) => row.split(/\s+/)[0]), ['infra', 'master', 'worker']);
  const worker = rows.find((row) => row.startsWith('worker'))!.split(/\s+/);
  assert.match(worker[1]!, /^rendered-worker-[0-9a-f]{32}$/);
  assert.equal(worker[5], '1', 'machine count');
  assert.equal((await mcctl('get', 'mcp', 'worker')).stdout.split('\n').length, 3, 'one pool by name, with its alias');
});

test('-o json and -o yaml on every read', async () => {
  const pools = JSON.parse((await mcctl('get', 'pools', '-o', 'json')).stdout);
  assert.equal(pools.kind, 'List');
  assert.equal(pools.items[0].kind, 'MachineConfigPool');
  const pool = parse((await mcctl('get', 'pool', 'worker', '-o', 'yaml')).stdout);
  assert.equal(pool.metadata.name, 'worker');
  assert.ok(pool.status.conditions.some((c: any) => c.type === 'Updated'));
  const node = JSON.parse((await mcctl('get', 'nodes', 'cli-node', '-o', 'json')).stdout);
  assert.equal(node.pool, 'worker');
  const mc = parse((await mcctl('get', 'mc', '50-infra', '-o', 'yaml')).stdout);
  assert.equal(mc.spec.config.storage.files[0].path, '/etc/testinfra');
  const rendered = JSON.parse((await mcctl('get', 'rendered', '-o', 'json')).stdout);
  assert.ok(rendered.items.length >= 3);
  for (const resource of ['nodes', 'mc', 'rendered']) {
    const r = await mcctl('get', resource);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^NAME\s/);
  }
});

test('describe pool and node show conditions, reasons and the node detail', async () => {
  const pool = await mcctl('describe', 'pool', 'worker');
  assert.equal(pool.status, 0, pool.stderr);
  assert.match(pool.stdout, /^Name:\s+worker$/m);
  assert.match(pool.stdout, /Updating\s+(True|False)\s+\w+/);
  assert.match(pool.stdout, /cli-node/);
  agent.report({ state: 'Degraded', phase: 'apply', reason: 'apply: file /etc/chrony.conf: EROFS: read-only file system' });
  // The report is stored in the next status batch and the pool's conditions by the leader's next
  // pass, up to a second later under load: each is polled, bounded.
  const described = async (args: string[], re: RegExp) => {
    let out = '';
    for (const deadline = Date.now() + 15_000; Date.now() < deadline && !re.test(out); await new Promise((r) => setTimeout(r, 50))) out = (await mcctl('describe', ...args)).stdout;
    return out;
  };
  const node = { stdout: await described(['node', 'cli-node'], /^State:\s+Degraded$/m) };
  assert.match(node.stdout, /^State:\s+Degraded$/m);
  assert.match(node.stdout, /^Reason:\s+apply: file \/etc\/chrony\.conf: EROFS: read-only file system$/m);
  assert.match(node.stdout, /topology\.kubernetes\.io\/zone=z1/);
  const poolAfter = { stdout: await described(['pool', 'worker'], /NodeDegraded\s+True/) };
  assert.match(poolAfter.stdout, /NodeDegraded\s+True\s+NodesDegraded.*cli-node \(Degraded: apply: file \/etc\/chrony\.conf/);
  agent.report({ state: 'Done', phase: 'done', reason: '' });
});

test('pause, resume, node reapply, delete', async () => {
  assert.equal((await mcctl('pause', 'pool', 'worker')).stdout, 'machineconfigpool/worker paused\n');
  assert.match((await mcctl('get', 'pool', 'worker', '-o', 'json')).stdout, /"paused": true/);
  assert.equal((await mcctl('resume', 'pool', 'worker')).stdout, 'machineconfigpool/worker resumed\n');
  const reapply = await mcctl('node', 'reapply', 'cli-node');
  assert.equal(reapply.status, 0, reapply.stderr);
  await agent.waitFor(() => agent.commands.some((cmd) => cmd?.forceReapply?.requestedBy === 'admin'));
  assert.equal((await mcctl('delete', 'mc', '50-infra')).stdout, 'machineconfig/50-infra deleted\n');
  const gone = await mcctl('get', 'mc', '50-infra');
  assert.equal(gone.status, 1);
  assert.match(gone.stderr, /MachineConfig\/50-infra not found/);
});

test('watch prints the current state, then changes', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...conn, 'watch'], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const rl = createInterface({ input: child.stdout });
  const seen = (re: RegExp) => new Promise<void>((resolve) => {
    if (lines.some((l) => re.test(l))) return resolve();
    rl.on('line', (l) => { if (re.test(l)) resolve(); });
  });
  rl.on('line', (l) => lines.push(l));
  await seen(/--- current state above; changes follow ---/);
  assert.ok(lines.some((l) => /ADDED\s+pool\/worker/.test(l)));
  assert.ok(lines.some((l) => /ADDED\s+node\/cli-node/.test(l)));
  agent.report({ state: 'Working', phase: 'apply' });
  await seen(/MODIFIED\s+node\/cli-node .*state=Working phase=apply/);
  child.kill('SIGINT');
  await new Promise((r) => child.once('exit', r));
  agent.report({ state: 'Done', phase: 'done' });
});

test('errors: unreachable server, bad credentials, bad documents, unknown resources', async () => {
  const down = await runCliAsync(['--server', '127.0.0.1:1', '--pki-dir', server.pki.dir, '--request-timeout', '2', '--config', '/dev/null', 'get', 'pools']);
  assert.equal(down.status, 1);
  assert.match(down.stderr, /^error: cannot list pools: no connection to 127\.0\.0\.1:1 over TLS .*connection refused/);
  assert.equal(down.stdout, '');
  const nodeCreds = await server.pki.node('cli-node');
  const denied = await runCliAsync(['--server', server.address, '--ca', nodeCreds.ca, '--cert', nodeCreds.cert, '--key', nodeCreds.key, '--config', '/dev/null', 'get', 'pools']);
  assert.equal(denied.status, 1);
  assert.match(denied.stderr, /not allowed: certificate CN=cli-node, O=mcplane:nodes may not use this service: it needs O=mcplane:admins/);
  const bad = await runCliAsync([...conn, 'apply', '-f', '-'], { input: 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: x}\nspec: {kernelType: turbo}\n' });
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /<stdin>#0: MachineConfig\/x: spec\.kernelType: unknown kernelType "turbo".*\[kernel-type\]/);
  const noServer = await runCliAsync(['--config', '/dev/null', 'get', 'pools'], { env: { MCPLANE_SERVER: '' } });
  assert.match(noServer.stderr, /no server given/);
  assert.match((await mcctl('get', 'widgets')).stderr, /unknown resource "widgets"/);
});

test('pki init writes a CA, server, admin and node certificates and a bootstrap token', async () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'pki-cli-')), 'pki');
  const r = await runCliAsync(['pki', 'init', dir, '--host', 'mcplane.example.com', '--node', 'n1']);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(readdirSync(dir).sort(), ['admin.crt', 'admin.key', 'bootstrap-token', 'ca.crt', 'ca.key', 'nodes', 'server.crt', 'server.key']);
  const { readFileSync, statSync } = await import('node:fs');
  assert.deepEqual(identityOf(readFileSync(join(dir, 'nodes', 'n1.crt'))), { commonName: 'n1', organization: 'mcplane:nodes', organizationalUnit: 'worker' });
  assert.equal(statSync(join(dir, 'ca.key')).mode & 0o777, 0o600);
  const { X509Certificate } = await import('node:crypto');
  assert.match(new X509Certificate(readFileSync(join(dir, 'server.crt'))).subjectAltName!, /DNS:mcplane\.example\.com/);
  const again = await runCliAsync(['pki', 'init', dir]);
  assert.equal(again.status, 1);
  assert.match(again.stderr, /already holds a CA/);
  const more = await runCliAsync(['pki', 'node', 'n2', '--pki-dir', dir]);
  assert.equal(more.status, 0, more.stderr);
});
