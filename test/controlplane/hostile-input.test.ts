// Whatever a client sends, the server answers with a clear status and keeps serving.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { status as Status } from '@grpc/grpc-js';
import { before, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { CLIENT_CHANNEL_OPTIONS } from '../../src/runtime/grpc-options.ts';
import { loadMcplaneProto } from '../../src/runtime/proto.ts';
import { clientCredentials } from '../../src/runtime/tls.ts';
import { RemoteCallError } from '../../src/machineconfig/index.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

const { server, c } = serverFixture();

async function rawStream(node: string) {
  const tls = await server.pki.node(node);
  const { grpc } = loadMcplaneProto();
  const client = new grpc.mcplane.v1.AgentService(server.address, clientCredentials({ ca: readFileSync(tls.ca), cert: readFileSync(tls.cert), key: readFileSync(tls.key) }), CLIENT_CHANNEL_OPTIONS);
  const stream = client.connect();
  const error = new Promise<{ code: number; details: string }>((resolve) => stream.on('error', resolve));
  stream.on('data', () => undefined);
  return { stream, error, close: () => client.close() };
}

test('a status report before registering is refused', async () => {
  const s = await rawStream('abuse-1');
  s.stream.write({ status: { status: { state: 'Done' } } });
  const err = await s.error;
  assert.equal(err.code, Status.PERMISSION_DENIED);
  assert.match(err.details, /first message on an agent stream must be register/);
  s.close();
});

test('a register with an invalid node name is INVALID_ARGUMENT naming the rule', async () => {
  const s = await rawStream('abuse-2');
  s.stream.write({ register: { nodeName: 'Not A Name!', labels: {}, bootId: '', agentVersion: '' } });
  const err = await s.error;
  assert.equal(err.code, Status.INVALID_ARGUMENT);
  assert.match(err.details, /Node\/Not A Name!: register\.nodeName: "Not A Name!" is not a DNS subdomain: .*\[rfc1123-subdomain\]/);
  s.close();
});

test('an unknown state from an agent degrades the node with a reason instead of being trusted', async () => {
  const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('abuse-3'), name: 'abuse-3' });
  await agent.connect();
  agent.report({ state: 'Exploded', reason: 'cosmic rays' });
  const getNode = () => call(c, c.status.getNode.bind(c.status), { name: 'abuse-3' }, 'get');
  // Reports are stored in batches: wait for this one rather than a fixed pause.
  await eventually(async () => (await getNode()).status?.state === 'Degraded', 10_000, 'the report stored');
  const node = await getNode();
  assert.equal(node.status!.state, 'Degraded');
  assert.equal(node.status!.reason, 'agent reported unknown state "Exploded": cosmic rays');
  agent.close();
});

test('pinned image set statuses are stored within bounds: at most 100 sets, each reason cut, counts whole', async () => {
  const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('abuse-pis'), name: 'abuse-pis' });
  await agent.connect();
  const set = (i: number) => ({ name: `set-${i}`, desiredGeneration: 2, currentGeneration: -5, imagesDone: 1, imagesTotal: 3, lastFailedImage: 'x'.repeat(2000), lastFailureReason: 'r'.repeat(8000), lastFailureUnixMs: 1, state: 'Failed', lastFailureCode: 'MCPLANE_PINNED_IMAGE_PULL' });
  agent.report({ state: 'Done', pinnedImageSets: Array.from({ length: 150 }, (_, i) => set(i)) });
  const getNode = () => call(c, c.status.getNode.bind(c.status), { name: 'abuse-pis' }, 'get');
  await eventually(async () => ((await getNode()).status?.pinnedImageSets.length ?? 0) > 0, 10_000, 'the report stored');
  const sets = (await getNode()).status!.pinnedImageSets;
  assert.equal(sets.length, 100);
  assert.equal(sets[0]!.name, 'set-0');
  assert.equal(sets[0]!.state, 'Failed');
  assert.equal(sets[0]!.lastFailureCode, 'MCPLANE_PINNED_IMAGE_PULL');
  assert.equal(sets[0]!.currentGeneration, 0, 'a negative count is no count');
  assert.ok(sets[0]!.lastFailureReason.length <= 4096 && sets[0]!.lastFailureReason.endsWith('more characters]'), `reason cut: ${sets[0]!.lastFailureReason.length}`);
  assert.ok(sets[0]!.lastFailedImage.length <= 1024);
  agent.close();
});

test('an Apply above the message size limit is refused, and the server keeps serving', async () => {
  const huge = 'x'.repeat(17 * 1024 * 1024);
  await assert.rejects(call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'huge.yaml', text: huge }], dryRun: false }, 'apply'),
    (e: RemoteCallError) => e.grpcCode === Status.RESOURCE_EXHAUSTED);
  const garbage = ['\u0000\u0001\u0002', '{"kind": "MachineConfig"', '[1, 2, 3]', '!!binary AAAA', 'a: &a [*a]', '- - - -', 'kind: MachineConfig\nmetadata: []\nspec: 7'];
  for (const text of garbage) {
    await assert.rejects(call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'g.yaml', text }], dryRun: false }, 'apply'),
      (e: RemoteCallError) => e.grpcCode === Status.INVALID_ARGUMENT && e.problems.length > 0, JSON.stringify(text));
  }
  const { pools } = await call(c, c.status.listPools.bind(c.status), {}, 'list');
  assert.ok(pools.length >= 2);
});

test('unknown kinds and names in Delete, Get and SetPoolPaused are clear errors', async () => {
  await assert.rejects(call(c, c.config.delete.bind(c.config), { kind: 'Secret', name: 'x' }, 'delete'), (e: RemoteCallError) => e.grpcCode === Status.INVALID_ARGUMENT && /cannot delete kind "Secret"/.test(e.message));
  await assert.rejects(call(c, c.config.setPoolPaused.bind(c.config), { name: 'nope', paused: true }, 'pause'), (e: RemoteCallError) => e.grpcCode === Status.NOT_FOUND && /MachineConfigPool\/nope not found/.test(e.message));
  await assert.rejects(call(c, c.config.getRenderedConfig.bind(c.config), { name: '' }, 'get'), (e: RemoteCallError) => e.grpcCode === Status.NOT_FOUND);
  await assert.rejects(call(c, c.config.reapplyNode.bind(c.config), { name: 'ghost' }, 'reapply'), (e: RemoteCallError) => e.grpcCode === Status.NOT_FOUND);
});
