// Render failures keep the last good config and say why; rendered configs in use are never deleted.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { afterEach, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { RENDERED_HISTORY, renderedConfigPut } from '../../src/controlplane/controllers/render-controller.ts';
import { defaultPools, parseManifests, renderPool, sha256Hex } from '../../src/machineconfig/index.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
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
  // Apply answers once the pool is rendered; the collection of old renders may come a pass
  // later (seen on etcd), so the count is waited for, and checked exactly once it settles.
  const list = async () => (await call(c, c.config.listRenderedConfigs.bind(c.config), { pool: 'worker' }, 'list')).renderedConfigs;
  await eventually(async () => (await list()).length <= RENDERED_HISTORY + 1, 5000, 'old renders collected');
  const renderedConfigs = await list();
  const names = renderedConfigs.map((r) => r.name);
  assert.ok(names.includes(pinned), 'the config the node runs is kept');
  // The pool may name it too, as the config its rollout last completed on (its rollback point),
  // depending on whether the rollout saw the node Done before the pause.
  const referencedBy = renderedConfigs.find((r) => r.name === pinned)!.referencedBy;
  assert.deepEqual(referencedBy.filter((r) => r.startsWith('node/')), ['node/slow'], 'a node that needs it for several reasons is listed once');
  assert.equal(names.length, RENDERED_HISTORY + 1, `history plus the pinned one: ${names.join(' ')}`);
  agent.close();
});

test('a rendered config close to the store\'s 1.5 MiB request limit is stored, read back and assigned', async () => {
  server = await startTestServer();
  const c = server.admin();
  // Random bytes do not compress: 1,050 KiB of them are 1.37 MiB of base64 in the rendered spec.
  const payload = randomBytes(1050 * 1024).toString('base64');
  const doc = {
    apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig',
    metadata: { name: '50-near-limit', labels: { 'machineconfiguration.openshift.io/role': 'worker' } },
    spec: { config: { ignition: { version: '3.4.0' }, storage: { files: [{ path: '/etc/near-limit.bin', contents: { source: `data:;base64,${payload}` } }] } } },
  };
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'near-limit.json', text: JSON.stringify(doc) }], dryRun: false }, 'apply');
  const pool = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
  assert.equal(pool.status!.conditions.find((x) => x.type === 'RenderDegraded')!.status, 'False');
  const rendered = await call(c, c.config.getRenderedConfig.bind(c.config), { name: pool.status!.configuration }, 'get rendered');
  assert.ok(rendered.specJson.length > 1.3 * 1024 * 1024, `rendered spec is ${rendered.specJson.length} bytes`);
  assert.ok(rendered.specJson.includes(payload), 'the content comes back whole');
  const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('near-limit'), name: 'near-limit', autoDone: true });
  await agent.connect();
  await agent.waitFor(() => agent.lastAssignment?.renderedConfig === pool.status!.configuration);
  assert.equal(agent.lastAssignment!.specJson, rendered.specJson);
  agent.close();
});

test('an Apply too large for one transaction is refused whole, saying why and what to do', async () => {
  server = await startTestServer();
  const c = server.admin();
  const manifests = ['a', 'b', 'c'].map((n) => ({
    source: `${n}.json`,
    text: JSON.stringify({
      apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig',
      metadata: { name: `50-${n}`, labels: { 'machineconfiguration.openshift.io/role': 'infra' } },
      spec: { config: { ignition: { version: '3.4.0' }, storage: { files: [{ path: `/etc/${n}.bin`, contents: { source: `data:;base64,${randomBytes(600 * 1024).toString('base64')}` } }] } } },
    }),
  }));
  await assert.rejects(call(c, c.config.apply.bind(c.config), { manifests, dryRun: false }, 'apply'), (err: Error) => {
    assert.match(err.message, /apply-size/);
    assert.match(err.message, /one transaction/);
    return true;
  });
  const { machineConfigs } = await call(c, c.config.listMachineConfigs.bind(c.config), {}, 'list');
  assert.deepEqual(machineConfigs.map((m) => m.name).filter((n) => /^50-[abc]$/.test(n)), [], 'nothing of it stored');
});

test("a rendered config is stored as the text its render hashed: byte for byte what JSON.stringify gives its value", () => {
  const { configs, problems } = parseManifests([
    karg('10-karg', '"quote\\"d", "ünï"'),
    `apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 20-file, labels: {machineconfiguration.openshift.io/role: worker}}\nspec: {config: {ignition: {version: 3.4.0}, storage: {files: [{path: /etc/a, mode: 0644, contents: {source: "data:,%E2%9C%93%0A"}}]}}}\n`,
  ].map((m) => (typeof m === 'string' ? m : m.text)).join('---\n'));
  assert.deepEqual(problems, []);
  const rendered = renderPool(defaultPools().find((p) => p.metadata.name === 'worker')!, configs);
  const op = renderedConfigPut(rendered);
  assert.equal(op.json, JSON.stringify(op.value), 'the stored bytes do not change');
  assert.ok(!('specJson' in (op.value as object)), 'the record holds the spec once');
  assert.ok(op.json!.includes(`"spec":${rendered.specJson},`), 'the text the render made');
  assert.equal(sha256Hex(rendered.specJson).slice(0, 32), rendered.hash);
});
