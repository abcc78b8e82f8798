// "Done" means the node is on the config it should be on: between the leader assigning a new
// config (after a drain, say) and the agent's first report on it, the agent's last report still
// says Done on the old config; shown as is, the node reads Working, Done, Working (issue 22).

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer | undefined;
let agent: SimulatedAgent | undefined;
after(async () => {
  agent?.close();
  await server?.close();
});

test('a node whose agent has not yet taken its new config reads Working, never Done with currentConfig != desiredConfig', async () => {
  server = await startTestServer();
  const c = server.admin();
  const apply = (text: string) => call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'a.yaml', text }], dryRun: false }, 'apply');
  const target = async () => (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  const node = () => call(c, c.status.getNode.bind(c.status), { name: 'w0' }, 'get node');
  await apply(poolYaml('worker', '  maxUnavailable: 1\n'));
  await apply(mcYaml('50-karg', 'worker', '  kernelArguments: [a=1]\n'));
  agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('w0'), name: 'w0', autoDone: false, labels: { 'node-role.kubernetes.io/worker': '' } });
  await agent.connect();
  const first = await target();
  await agent.waitFor(() => agent!.lastAssignment?.renderedConfig === first);
  agent.report({ currentConfig: first, desiredConfig: first, state: 'Done', phase: 'done' });
  await eventually(async () => (await node()).status!.state === 'Done', 10_000, 'Done on the first config');

  await apply(mcYaml('50-karg', 'worker', '  kernelArguments: [a=2]\n'));
  const second = await target();
  await agent.waitFor(() => agent!.lastAssignment?.renderedConfig === second);
  // The agent has the assignment but has not reported on it yet.
  const n = await node();
  assert.equal(n.status!.desiredConfig, second);
  assert.equal(n.status!.currentConfig, first);
  assert.equal(n.status!.state, 'Working', 'not Done while currentConfig differs from desiredConfig');

  agent.report({ currentConfig: second, desiredConfig: second, state: 'Done', phase: 'done' });
  await eventually(async () => (await node()).status!.state === 'Done', 10_000, 'Done on the second config');
});
