// A change that reaches every node of a pool at once (maxUnavailable 100%): the assignment is
// encoded once and written to every stream, a slice of streams per turn of the event loop
// (sessions/assignment-dispatcher.ts). Over real gRPC and TLS with simulated agents: more of them
// than one slice, two pools with different configs, and streams that end mid-fan-out.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
const agents: SimulatedAgent[] = [];
const WORKERS = 250; // more than a slice of 200
const INFRA = 10;
/** Agents the second test closes. */
let leaving: SimulatedAgent[] = [];

before(async () => {
  server = await startTestServer();
  const c = server.admin();
  await call(c, c.config.apply.bind(c.config), {
    manifests: [
      { source: 'pools.yaml', text: poolYaml('worker', '  maxUnavailable: 100%\n') },
      { source: 'infra.yaml', text: poolYaml('infra', '  maxUnavailable: 100%\n') },
      { source: 'a.yaml', text: mcYaml('50-a', 'worker', '  kernelArguments: [fan=0]\n') },
      { source: 'b.yaml', text: mcYaml('50-b', 'infra', '  kernelArguments: [infra=0]\n') },
    ],
    dryRun: false,
  }, 'apply');
  const connect = async (name: string, role: string) => {
    const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name, role), name, autoDone: true, labels: { [`node-role.kubernetes.io/${role}`]: '' } });
    await agent.connect();
    agents.push(agent);
    return agent;
  };
  for (let i = 0; i < WORKERS; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => connect(`w-${i + j}`, 'worker')));
  await Promise.all(Array.from({ length: INFRA }, (_, i) => connect(`i-${i}`, 'infra')));
});
after(async () => {
  for (const a of agents) a.close();
  await server.close();
});

const poolTarget = async (name: string): Promise<string> => {
  const c = server.admin();
  return (await call(c, c.status.getPool.bind(c.status), { name }, 'get')).status!.configuration;
};

test('every node of each pool gets its own pool\'s assignment, whole, though the fan-out spans several turns', async () => {
  const c = server.admin();
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'a.yaml', text: mcYaml('50-a', 'worker', '  kernelArguments: [fan=1]\n') }], dryRun: false }, 'apply');
  const worker = await poolTarget('worker');
  const infra = await poolTarget('infra');
  assert.notEqual(worker, infra);
  const target = (a: SimulatedAgent) => (a.options.name.startsWith('w-') ? worker : infra);
  await eventually(async () => agents.every((a) => a.lastAssignment?.renderedConfig === target(a)), 30_000, 'every agent has its pool\'s config').catch((err) => {
    const off = agents.filter((a) => a.lastAssignment?.renderedConfig !== target(a));
    throw new Error(`${err.message}: ${off.length} without it, e.g. ${off.slice(0, 3).map((a) => `${a.options.name}: ${a.lastAssignment?.renderedConfig}`).join(', ')}`);
  });
  for (const a of agents) {
    const spec = JSON.parse(a.lastAssignment!.specJson) as { kernelArguments?: string[] };
    assert.deepEqual(spec.kernelArguments, a.options.name.startsWith('w-') ? ['fan=1'] : ['infra=0'], `${a.options.name}'s spec`);
    assert.equal(a.lastAssignment!.pool, a.options.name.startsWith('w-') ? 'worker' : 'infra');
    assert.equal(a.lastAssignment!.driftPolicy, 'Degrade');
  }
  // Each agent got the worker config once: the same assignment is not sent twice.
  for (const a of agents.filter((x) => x.options.name.startsWith('w-'))) {
    assert.equal(a.assignments.filter((x) => x.renderedConfig === worker).length, 1, `${a.options.name} got ${worker} once`);
  }
});

test('streams that end while a fan-out is under way are skipped; the rest get it', async () => {
  const c = server.admin();
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'a.yaml', text: mcYaml('50-a', 'worker', '  kernelArguments: [fan=2]\n') }], dryRun: false }, 'apply');
  // Close a tenth of the workers at once, as the fan-out starts.
  leaving = agents.filter((a, i) => a.options.name.startsWith('w-') && i % 10 === 0);
  for (const a of leaving) a.close();
  const worker = await poolTarget('worker');
  const staying = agents.filter((a) => a.options.name.startsWith('w-') && !leaving.includes(a));
  await eventually(async () => staying.every((a) => a.lastAssignment?.renderedConfig === worker), 30_000, 'every connected worker has the new config');
  for (const a of staying) assert.deepEqual((JSON.parse(a.lastAssignment!.specJson) as { kernelArguments: string[] }).kernelArguments, ['fan=2']);
  const info = await call(c, c.status.getServerInfo.bind(c.status), {}, 'info');
  assert.equal(info.version.length > 0, true, 'the server still answers');
});

test('a pool change that every stream must hear at once (its drift policy) reaches all of them', async () => {
  const c = server.admin();
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'pools.yaml', text: poolYaml('worker', '  maxUnavailable: 100%\n  driftPolicy: Reconcile\n') }], dryRun: false }, 'apply');
  const workers = agents.filter((a) => a.options.name.startsWith('w-') && !leaving.includes(a));
  assert.ok(workers.length > 200, 'more streams than one slice');
  await eventually(async () => workers.every((a) => a.lastAssignment?.driftPolicy === 'Reconcile'), 30_000, 'every worker heard the drift policy');
  for (const a of agents.filter((x) => x.options.name.startsWith('i-'))) assert.equal(a.lastAssignment!.driftPolicy, 'Degrade', `${a.options.name} is in another pool`);
});
