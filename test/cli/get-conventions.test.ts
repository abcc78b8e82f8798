// mcctl get with kubectl's conventions, against a real server over TLS, run as a separate
// process the way an operator runs it.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { parse } from 'yaml';
import { REPO_ROOT, runCliAsync } from '../helpers/run-cli.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

const { server, agents, conn } = serverFixture({}, async () => {
  for (const [name, zone] of [['n1', 'z1'], ['n2', 'z2'], ['n3', 'z3']] as const) {
    const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name), name, autoDone: true,
      labels: { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': zone, ...(name === 'n3' ? { legacy: 'yes' } : {}) } });
    await agent.connect();
    agents.push(agent);
  }
  const applied = await mcctl('apply', '-f', 'examples');
  assert.equal(applied.status, 0, applied.stderr);
});

const mcctl = (...args: string[]) => runCliAsync([...conn, ...args]);
const firstColumn = (stdout: string): string[] => stdout.trimEnd().split('\n').map((l) => l.split(/\s+/)[0]!);

test('-l selects nodes and MachineConfigs by label, with kubectl\'s selector syntax', async () => {
  assert.deepEqual(firstColumn((await mcctl('get', 'nodes', '-l', 'topology.kubernetes.io/zone=z1')).stdout), ['NAME', 'n1']);
  assert.deepEqual(firstColumn((await mcctl('get', 'nodes', '--selector', 'topology.kubernetes.io/zone in (z2,z3),!legacy')).stdout), ['NAME', 'n2']);
  assert.deepEqual(firstColumn((await mcctl('get', 'nodes', '-l', 'topology.kubernetes.io/zone!=z1,node-role.kubernetes.io/worker')).stdout), ['NAME', 'n2', 'n3']);
  const mcs = firstColumn((await mcctl('get', 'mc', '-l', 'machineconfiguration.openshift.io/role=infra', '--no-headers')).stdout);
  assert.deepEqual(mcs, ['50-infra']);
  const bad = await mcctl('get', 'nodes', '-l', 'zone in (a');
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /--selector "zone in \(a": unbalanced "\("/);
});

test('"No resources found" goes to stderr with exit 0; json still prints an empty List', async () => {
  const none = await mcctl('get', 'nodes', '-l', 'topology.kubernetes.io/zone=nowhere');
  assert.equal(none.status, 0, none.stderr);
  assert.equal(none.stdout, '');
  assert.equal(none.stderr, 'No resources found\n');
  const json = JSON.parse((await mcctl('get', 'nodes', '-l', 'topology.kubernetes.io/zone=nowhere', '-o', 'json')).stdout);
  assert.deepEqual([json.kind, json.items], ['List', []]);
});

test('-o wide, -o name, --no-headers', async () => {
  const wide = await mcctl('get', 'nodes', '-o', 'wide');
  assert.deepEqual(wide.stdout.split('\n')[0]!.split(/\s+/), ['NAME', 'POOL', 'STATE', 'PHASE', 'CURRENTCONFIG', 'DESIREDCONFIG', 'CONNECTED', 'AGE', 'ZONE', 'AGENT-VERSION', 'CERT-EXPIRES', 'REASON']);
  assert.match(wide.stdout, /^n2\s+worker\s+Done\s.*\sz2\s+\S+\s+\S+\s+<none>$/m);
  assert.equal((await mcctl('get', 'nodes', '-o', 'name')).stdout, 'node/n1\nnode/n2\nnode/n3\n');
  assert.equal((await mcctl('get', 'pools', '-o', 'name')).stdout, 'machineconfigpool/infra\nmachineconfigpool/master\nmachineconfigpool/worker\n');
  const bare = await mcctl('get', 'nodes', '--no-headers');
  assert.deepEqual(firstColumn(bare.stdout), ['n1', 'n2', 'n3']);
  assert.match((await mcctl('get', 'nodes', '-o', 'yml')).stderr, /-o yml: unknown output format; use wide, name, yaml, json, jsonpath=TEMPLATE or custom-columns=HEADER:EXPR/);
});

test('-o jsonpath with kubectl\'s template syntax', async () => {
  assert.equal((await mcctl('get', 'nodes', '-o', 'jsonpath={.items[*].metadata.name}')).stdout, 'n1 n2 n3');
  const range = await mcctl('get', 'pools', '-o', 'jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Updated")].status}{"\\n"}{end}');
  assert.equal(range.status, 0, range.stderr);
  assert.match(range.stdout, /^worker=(True|False)$/m);
  assert.equal(range.stdout.trimEnd().split('\n').length, 3);
  assert.equal((await mcctl('get', 'node', 'n2', '-o', 'jsonpath={.metadata.labels.topology\\.kubernetes\\.io/zone}')).stdout, 'z2');
  assert.match((await mcctl('get', 'nodes', '-o', 'jsonpath={.items[*]')).stderr, /"\{" at position 0 is not closed/);
});

test('TYPE/NAME and several names in one command', async () => {
  const two = await mcctl('get', 'nodes', 'n1', 'n3', '-o', 'json');
  assert.equal(two.status, 0, two.stderr);
  const list = JSON.parse(two.stdout);
  assert.deepEqual(list.items.map((n: any) => n.metadata.name), ['n1', 'n3']);
  const mixed = await mcctl('get', 'pool/worker', 'node/n2', 'mcp/infra');
  assert.equal(mixed.status, 0, mixed.stderr);
  const tables = mixed.stdout.split('\n\n');
  assert.equal(tables.length, 2);
  assert.deepEqual(firstColumn(tables[0]!), ['NAME', 'machineconfigpool/worker', 'machineconfigpool/infra']);
  assert.deepEqual(firstColumn(tables[1]!), ['NAME', 'node/n2']);
  const missing = await mcctl('get', 'nodes', 'n1', 'ghost');
  assert.equal(missing.status, 1);
  assert.deepEqual(firstColumn(missing.stdout), ['NAME', 'n1']);
  assert.match(missing.stderr, /Node\/ghost not found/);
  assert.match((await mcctl('get', 'nodes', 'node/n1')).stderr, /either a resource type and names .* or TYPE\/NAME/);
});

test('every printed object has apiVersion and kind', async () => {
  const docs = [
    parse((await mcctl('get', 'node', 'n1', '-o', 'yaml')).stdout),
    ...JSON.parse((await mcctl('get', 'pools', '-o', 'json')).stdout).items,
    ...JSON.parse((await mcctl('get', 'mc', '-o', 'json')).stdout).items,
    ...JSON.parse((await mcctl('get', 'rendered', '-o', 'json')).stdout).items,
    ...JSON.parse((await mcctl('get', 'replicas', '-o', 'json')).stdout).items,
  ];
  assert.ok(docs.length > 8);
  for (const d of docs) {
    assert.ok(d.apiVersion && d.kind, `${JSON.stringify(d).slice(0, 80)} lacks apiVersion or kind`);
  }
  assert.deepEqual([docs[0].apiVersion, docs[0].kind], ['mcplane.io/v1', 'Node']);
});

test('get replicas lists the server replicas (StatusService.ListReplicas)', async () => {
  const r = await mcctl('get', 'replicas');
  assert.equal(r.status, 0, r.stderr);
  const [header, row] = r.stdout.trimEnd().split('\n');
  assert.deepEqual(header!.split(/\s{2,}/), ['NAME', 'ADDRESS', 'LEADER', 'AGENTS', 'LAST-HEARTBEAT', 'VERSION', 'AGE']);
  // AGE in its units: a slow run can be minutes in ("2m49s").
  assert.match(row!, /^(127\.0\.0\.1:\d+)\s+\1\s+True\s+3\s+\d+s ago\s+\S+\s+(\d+[smhd])+$/);
});

test('get -w prints the table, then one row per change, in order, never repeating an unchanged row', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...conn, 'get', 'nodes', '-w', '-l', 'topology.kubernetes.io/zone in (z1,z2)'],
    { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let waiting: (() => void) | undefined;
  createInterface({ input: child.stdout }).on('line', (l) => { lines.push(l); waiting?.(); });
  const until = (pred: () => boolean) => new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out; lines so far:\n${lines.join('\n')}`)), 15_000);
    const check = () => { if (pred()) { clearTimeout(timer); waiting = undefined; resolve(); } };
    waiting = check;
    check();
  });
  try {
    await until(() => lines.length >= 3);
    assert.match(lines[0]!, /^NAME\s+POOL\s+STATE/);
    assert.deepEqual(lines.slice(1).map((l) => l.split(/\s+/)[0]), ['n1', 'n2']);
    const [n1] = agents;
    n1!.report({ state: 'Working', phase: 'apply' });
    await until(() => lines.some((l) => /^n1\s+worker\s+Working\s+apply/.test(l)));
    // Reports a moment apart, as an agent's phases are: the server stores reports in batches,
    // and a watcher sees what was stored.
    const pause = () => new Promise((r) => setTimeout(r, 150));
    n1!.report({ reason: 'a reason no column shows' });
    agents[2]!.report({ state: 'Working', phase: 'apply' }); // n3 is not selected
    await pause();
    n1!.report({ state: 'Working', phase: 'reboot' });
    // A batch keeps only a node's latest report: on a loaded machine a late flush would take
    // reboot and Done together, and no watcher could see reboot. The row is what is tested.
    await until(() => lines.some((l) => /^n1\s+worker\s+Working\s+reboot/.test(l)));
    n1!.report({ state: 'Done', phase: 'done', reason: '' });
    await until(() => lines.filter((l) => l.startsWith('n1 ')).length >= 4);
    await new Promise((r) => setTimeout(r, 300));
    const n1Rows = lines.filter((l) => l.startsWith('n1 ')).map((l) => l.split(/\s+/).slice(2, 4).join(' '));
    assert.deepEqual(n1Rows, ['Done done', 'Working apply', 'Working reboot', 'Done done']);
    assert.ok(!lines.some((l) => l.startsWith('n3')), 'n3 is not selected');
    // The rows line up under the table's header.
    assert.equal(lines.at(-1)!.indexOf('worker'), lines[0]!.indexOf('POOL'));
  } finally {
    child.kill('SIGINT');
    await new Promise((r) => child.once('exit', r));
    agents[2]!.report({ state: 'Done', phase: 'done' });
  }
});
