// ConfigService over real gRPC with mutual TLS: Apply is all or nothing and lists every problem.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { call } from '../../src/cli/client/call.ts';
import { RemoteCallError } from '../../src/machineconfig/index.ts';
import { assertApplyRefused } from '../helpers/apply-refusal.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

const { server, c } = serverFixture();

const examples = ['50-examplecorp-chrony.yaml', '99-worker-realtime.yaml', '50-infra.yaml', 'infra-machineconfigpool.yaml']
  .map((f) => ({ source: f, text: readFileSync(`examples/${f}`, 'utf8') }));

test('the built-in master and worker pools exist from the start', async () => {
  const { pools } = await call(c, c.status.listPools.bind(c.status), {}, 'list');
  assert.deepEqual(pools.map((p) => p.name), ['master', 'worker']);
  for (const p of pools) assert.match(p.status!.configuration, new RegExp(`^rendered-${p.name}-[0-9a-f]{32}$`));
});

test('apply creates, then reports unchanged, then configured; pools render', async () => {
  const first = await call(c, c.config.apply.bind(c.config), { manifests: examples, dryRun: false }, 'apply');
  assert.deepEqual(first.objects.map((o) => `${o.kind}/${o.name}:${o.action}`), [
    'MachineConfig/50-examplecorp-chrony:created', 'MachineConfig/99-worker-realtime:created', 'MachineConfig/50-infra:created', 'MachineConfigPool/infra:created',
  ]);
  const again = await call(c, c.config.apply.bind(c.config), { manifests: examples, dryRun: false }, 'apply');
  assert.ok(again.objects.every((o) => o.action === 'unchanged'));
  const infra = await call(c, c.status.getPool.bind(c.status), { name: 'infra' }, 'get');
  assert.deepEqual(infra.status!.configurationSources, ['50-examplecorp-chrony', '99-worker-realtime', '50-infra']);
  const rendered = await call(c, c.config.getRenderedConfig.bind(c.config), { name: infra.status!.configuration }, 'get');
  const spec = JSON.parse(rendered.specJson);
  assert.equal(spec.kernelType, 'realtime');
  assert.deepEqual(spec.config.storage.files.map((f: { path: string }) => f.path), ['/etc/chrony.conf', '/etc/testinfra']);

  const changed = examples[1]!.text.replace('kernelType: realtime', 'kernelType: 64k-pages');
  const res = await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'rt.yaml', text: changed }], dryRun: false }, 'apply');
  assert.equal(res.objects[0]!.action, 'configured');
  const worker = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
  const spec2 = JSON.parse((await call(c, c.config.getRenderedConfig.bind(c.config), { name: worker.status!.configuration }, 'get')).specJson);
  assert.equal(spec2.kernelType, '64k-pages');
});

test('dry run reports what would change and stores nothing', async () => {
  const text = 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 10-dry, labels: {machineconfiguration.openshift.io/role: worker}}\nspec: {kernelArguments: [x]}\n';
  const res = await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'dry.yaml', text }], dryRun: true }, 'apply');
  assert.equal(res.objects[0]!.action, 'created');
  await assert.rejects(call(c, c.config.getMachineConfig.bind(c.config), { name: '10-dry' }, 'get'), (e: RemoteCallError) => e.grpcCode === Status.NOT_FOUND);
});

test('invalid documents: INVALID_ARGUMENT with every problem, and nothing of the request is stored', async () => {
  const good = 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 20-good}\nspec: {kernelArguments: [ok]}\n';
  const bad = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 20-bad}
spec:
  kernelType: turbo
  extensions: [vim]
  config: {ignition: {version: 3.4.0}, storage: {files: [{path: /usr/bin/x, mode: 0644}]}}
`;
  const refused = await assertApplyRefused(c, [{ source: 'good.yaml', text: good }, { source: 'bad.yaml', text: bad }], [
    'bad.yaml#0 MachineConfig/20-bad spec.config.storage.files[0].path path-writable-root',
    'bad.yaml#0 MachineConfig/20-bad spec.kernelType kernel-type',
    'bad.yaml#0 MachineConfig/20-bad spec.extensions[0] extension-allowlist',
  ]);
  assert.match(refused.message, /3 problems/);
  await assert.rejects(call(c, c.config.getMachineConfig.bind(c.config), { name: '20-good' }, 'get'), (e: RemoteCallError) => e.grpcCode === Status.NOT_FOUND);
  await assert.rejects(call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'x', text: 'kind: [' }], dryRun: false }, 'apply'),
    (e: RemoteCallError) => e.grpcCode === Status.INVALID_ARGUMENT && e.problems[0]!.rule === 'yaml-syntax');
  await assert.rejects(call(c, c.config.apply.bind(c.config), { manifests: [], dryRun: false }, 'apply'),
    (e: RemoteCallError) => e.grpcCode === Status.INVALID_ARGUMENT);
});

test('delete: a MachineConfig re-renders its pools; built-in pools cannot be deleted; unknown names are NOT_FOUND', async () => {
  const before = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  await call(c, c.config.delete.bind(c.config), { kind: 'MachineConfig', name: '99-worker-realtime' }, 'delete');
  const after = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
  assert.notEqual(after.status!.configuration, before);
  assert.ok(!after.status!.configurationSources.includes('99-worker-realtime'));
  await assert.rejects(call(c, c.config.delete.bind(c.config), { kind: 'MachineConfigPool', name: 'worker' }, 'delete'),
    (e: RemoteCallError) => e.grpcCode === Status.PERMISSION_DENIED && /built in/.test(e.message));
  await assert.rejects(call(c, c.config.delete.bind(c.config), { kind: 'MachineConfig', name: 'nope' }, 'delete'),
    (e: RemoteCallError) => e.grpcCode === Status.NOT_FOUND && /MachineConfig\/nope not found/.test(e.message));
});

test('pause and resume a pool', async () => {
  const paused = await call(c, c.config.setPoolPaused.bind(c.config), { name: 'worker', paused: true }, 'pause');
  assert.equal(paused.paused, true);
  assert.equal(paused.status!.conditions.find((x) => x.type === 'Updating')!.reason, 'Paused');
  const resumed = await call(c, c.config.setPoolPaused.bind(c.config), { name: 'worker', paused: false }, 'resume');
  assert.equal(resumed.paused, false);
});

test('grpc.health.v1 and server reflection answer', async () => {
  const { loadSync } = await import('@grpc/proto-loader');
  const grpcJs = await import('@grpc/grpc-js');
  const { protoPath } = await import('grpc-health-check');
  const health = grpcJs.loadPackageDefinition(loadSync(protoPath, { enums: String })) as any;
  const tls = { ca: readFileSync(`${server.pki.dir}/ca.crt`), key: readFileSync(`${server.pki.dir}/admin.key`), cert: readFileSync(`${server.pki.dir}/admin.crt`) };
  const client = new health.grpc.health.v1.Health(server.address, grpcJs.credentials.createSsl(tls.ca, tls.key, tls.cert));
  for (const service of ['', 'mcplane.v1.ConfigService']) {
    const res = await new Promise<any>((resolve, reject) => client.check({ service }, { deadline: Date.now() + 5000 }, (e: unknown, r: unknown) => (e ? reject(e) : resolve(r))));
    assert.equal(res.status, 'SERVING');
  }
  client.close();
  const reflectionProto = grpcJs.loadPackageDefinition(loadSync('grpc/reflection/v1alpha/reflection.proto', { includeDirs: ['node_modules/@grpc/reflection/build/proto'] })) as any;
  const refl = new reflectionProto.grpc.reflection.v1alpha.ServerReflection(server.address, grpcJs.credentials.createSsl(tls.ca, tls.key, tls.cert));
  const names = await new Promise<string[]>((resolve, reject) => {
    const s = refl.ServerReflectionInfo();
    s.on('data', (m: any) => { resolve(m.listServicesResponse.service.map((x: any) => x.name)); s.end(); });
    s.on('error', reject);
    s.write({ listServices: '' });
  });
  refl.close();
  for (const n of ['mcplane.v1.AgentService', 'mcplane.v1.StatusService', 'mcplane.v1.ConfigService']) assert.ok(names.includes(n), n);
});
