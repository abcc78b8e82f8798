// Render failures keep the last good config and say why; rendered configs in use are never deleted.

import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { RENDERED_HISTORY } from '../../src/controlplane/render-controller.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
afterEach(() => server.close());

const bigFile = (name: string) => ({
  source: `${name}.yaml`,
  text: JSON.stringify({
    apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig',
    metadata: { name, labels: { 'machineconfiguration.openshift.io/role': 'worker' } },
    spec: { config: { ignition: { version: '3.4.0' }, storage: { files: [{ path: `/etc/${name}`, contents: { source: 'data:;base64,' + Buffer.alloc(450 * 1024, name).toString('base64') } }] } } },
  }),
});
const karg = (name: string, value: string) => ({
  source: `${name}.yaml`,
  text: `apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: ${name}, labels: {machineconfiguration.openshift.io/role: worker}}\nspec: {kernelArguments: [${value}]}\n`,
});

test('a render failure sets RenderDegraded with the cause and keeps the last good config', async () => {
  server = await startTestServer();
  const c = server.admin();
  await call(c, c.config.apply.bind(c.config), { manifests: [bigFile('big-1'), bigFile('big-2')], dryRun: false }, 'apply');
  const good = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  await call(c, c.config.apply.bind(c.config), { manifests: [bigFile('big-3')], dryRun: false }, 'apply');
  const pool = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
  assert.equal(pool.status!.configuration, good, 'the last good config stays in force');
  const rd = pool.status!.conditions.find((x) => x.type === 'RenderDegraded')!;
  assert.equal(rd.status, 'True');
  assert.match(rd.message, /above the 1\.5 MiB limit; largest contributors: big-/);
  assert.match(rd.message, new RegExp(`nodes keep ${good}`));
  assert.equal(pool.status!.conditions.find((x) => x.type === 'Degraded')!.status, 'True');
  assert.ok(server.logs.some((l) => l.includes('render failed')));

  await call(c, c.config.delete.bind(c.config), { kind: 'MachineConfig', name: 'big-1' }, 'delete');
  const healed = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
  assert.equal(healed.status!.conditions.find((x) => x.type === 'RenderDegraded')!.status, 'False');
  assert.notEqual(healed.status!.configuration, good);
});

test('rendered configs: the last few per pool are kept, and one a node uses is never deleted', async () => {
  server = await startTestServer();
  const c = server.admin();
  await call(c, c.config.apply.bind(c.config), { manifests: [karg('10-k', 'v=0')], dryRun: false }, 'apply');
  // A node that takes its first config, then never finishes another: it pins that config.
  const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('slow'), name: 'slow' });
  await agent.connect();
  await agent.waitFor(() => agent.assignments.length === 1);
  const pinned = agent.lastAssignment!.renderedConfig;
  agent.report({ currentConfig: pinned, desiredConfig: pinned, state: 'Done' });
  await call(c, c.config.setPoolPaused.bind(c.config), { name: 'worker', paused: true }, 'pause');
  for (let i = 1; i <= RENDERED_HISTORY + 4; i++) {
    await call(c, c.config.apply.bind(c.config), { manifests: [karg('10-k', `v=${i}`)], dryRun: false }, 'apply');
  }
  const { renderedConfigs } = await call(c, c.config.listRenderedConfigs.bind(c.config), { pool: 'worker' }, 'list');
  const names = renderedConfigs.map((r) => r.name);
  assert.ok(names.includes(pinned), 'the config the node runs is kept');
  assert.deepEqual(renderedConfigs.find((r) => r.name === pinned)!.referencedBy, ['node/slow'], 'a node that needs it for several reasons is listed once');
  assert.equal(names.length, RENDERED_HISTORY + 1, `history plus the pinned one: ${names.join(' ')}`);
  agent.close();
});
