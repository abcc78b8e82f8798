// What an agent reports about itself when it registers (its labels, its version) is checked as
// Kubernetes' API server checks a Node: label syntax and lengths, and a bounded count. A
// misconfigured agent is refused with INVALID_ARGUMENT naming Node/<name>, the field and the rule,
// and nothing of it is stored; the server keeps serving. Real gRPC over loopback TLS.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { status as Status } from '@grpc/grpc-js';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { MAX_AGENT_VERSION_CHARS, MAX_NODE_LABELS } from '../../src/machineconfig/index.ts';
import { CLIENT_CHANNEL_OPTIONS } from '../../src/runtime/grpc-options.ts';
import { loadMcplaneProto } from '../../src/runtime/proto.ts';
import { clientCredentials } from '../../src/runtime/tls.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

const { server, c, agents } = serverFixture();

const WORKER = { 'node-role.kubernetes.io/worker': '' };

/** Registers `name` with these labels; resolves with the server's error, or undefined when admitted. */
async function register(name: string, labels: Record<string, string>, status: Partial<SimulatedAgent['status']> = {}): Promise<{ code: number; details: string } | undefined> {
  const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name), name, labels });
  agent.status = { ...agent.status, ...status };
  agents.push(agent);
  await agent.connect();
  return agent.error;
}

async function assertNotStored(name: string): Promise<void> {
  const err = await call(c, c.status.getNode.bind(c.status), { name }, 'get node').then(() => undefined, (e: { grpcCode?: number }) => e);
  assert.equal(err?.grpcCode, Status.NOT_FOUND, `Node/${name} was stored`);
}

test('1,502 labels with 205-character keys are refused with one problem naming the count', async () => {
  const labels = Object.fromEntries(Array.from({ length: 1502 }, (_, i) => [`${String(i).padStart(5, '0')}${'k'.repeat(200)}`, 'v']));
  const err = await register('flood', { ...WORKER, ...labels });
  assert.equal(err?.code, Status.INVALID_ARGUMENT, JSON.stringify(err));
  assert.match(err!.details, /Node\/flood: register\.labels: 1503 labels reported; a node may report at most 64 \[label-count\]/);
  assert.ok(err!.details.length < 1000, `one line, not one per label: ${err!.details.length} characters`);
  await assertNotStored('flood');
});

test('a 205-character label key is refused as Kubernetes refuses it, naming the key and the rule', async () => {
  const key = 'k'.repeat(205);
  const err = await register('longkey', { ...WORKER, [key]: 'v' });
  assert.equal(err?.code, Status.INVALID_ARGUMENT, JSON.stringify(err));
  assert.match(err!.details, new RegExp(`Node/longkey: register\\.labels\\.${key}: label key "${key}": the name must be 1-63 letters, digits, "-", "_" or "\\.", starting and ending with a letter or digit \\[label-syntax\\]`));
  await assertNotStored('longkey');
});

test('bad values, prefixes and control characters in labels are each named; the message quotes them escaped and cut', async () => {
  const err = await register('badlabels', {
    ...WORKER,
    'topology.kubernetes.io/zone': 'v'.repeat(64),
    'Bad_Prefix/name': '',
    'evil\u001b]0;pwned\u0007': 'x',
    'ok': 'new\nline',
  });
  assert.equal(err?.code, Status.INVALID_ARGUMENT, JSON.stringify(err));
  const d = err!.details;
  assert.match(d, /4 problems/);
  assert.match(d, /register\.labels\.topology\.kubernetes\.io\/zone: label "topology\.kubernetes\.io\/zone": value "v{60}…" \(64 characters\) is longer than 63 characters \[label-syntax\]/);
  assert.match(d, /register\.labels\.Bad_Prefix\/name: label key "Bad_Prefix\/name": the prefix must be a DNS subdomain \[label-syntax\]/);
  assert.match(d, /register\.labels\["evil\\u001b\]0;pwned\\u0007"\]: label key "evil\\u001b\]0;pwned\\u0007": must be a DNS subdomain prefix/);
  assert.match(d, /register\.labels\.ok: label "ok": value "new\\nline" must be empty or/);
  assert.doesNotMatch(d, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/, 'no raw control in the error');
  await assertNotStored('badlabels');

  // A key longer than any Kubernetes accepts is named by its start, not quoted whole.
  const huge = await register('hugekey', { ...WORKER, [`${'p'.repeat(400)}/name`]: '' });
  assert.match(huge!.details, /register\.labels\["p{60}…" \(405 characters\)\]: label key "p{60}…" \(405 characters\): longer than 317 characters/);
  assert.ok(huge!.details.length < 400, huge!.details);
});

test(`${MAX_NODE_LABELS} valid labels (the most allowed) are admitted`, async () => {
  const labels = Object.fromEntries(Array.from({ length: MAX_NODE_LABELS - 1 }, (_, i) => [`example.com/label-${i}`, `value-${i}`]));
  const err = await register('many', { ...WORKER, ...labels });
  assert.equal(err, undefined);
  const node = await call(c, c.status.getNode.bind(c.status), { name: 'many' }, 'get node');
  assert.equal(Object.keys(node.labels).length, MAX_NODE_LABELS);
});

/** Registers with this agentVersion on a bare stream; resolves with the error, or undefined when admitted. */
async function rawRegister(name: string, agentVersion: string): Promise<{ code: number; details: string } | undefined> {
  const tls = await server.pki.node(name);
  const { grpc } = loadMcplaneProto();
  const client = new grpc.mcplane.v1.AgentService(server.address, clientCredentials({ ca: readFileSync(tls.ca), cert: readFileSync(tls.cert), key: readFileSync(tls.key) }), CLIENT_CHANNEL_OPTIONS);
  const stream = client.connect();
  const error = new Promise<{ code: number; details: string } | undefined>((resolve) => {
    stream.on('error', resolve);
    stream.on('data', (m: { registered?: unknown }) => { if (m.registered) resolve(undefined); });
  });
  stream.write({ register: { nodeName: name, labels: WORKER, bootId: 'b', agentVersion } });
  try {
    return await error;
  } finally {
    client.close();
  }
}

test('an agent version with control characters, or longer than the bound, is refused at registration', async () => {
  const escaped = await rawRegister('badversion', '1.0\u001b]0;pwned\u0007\n');
  assert.equal(escaped?.code, Status.INVALID_ARGUMENT, 'admitted');
  assert.match(escaped!.details, /Node\/badversion: register\.agentVersion: the agent version "1\.0\\u001b\]0;pwned\\u0007\\n" contains the control character U\+001B; .* \[agent-version\]/);
  await assertNotStored('badversion');

  const long = await rawRegister('longversion', 'v'.repeat(MAX_AGENT_VERSION_CHARS + 1));
  assert.equal(long?.code, Status.INVALID_ARGUMENT, 'admitted');
  assert.match(long!.details, /register\.agentVersion: the agent version "v{40}…" \(129 characters\) is longer than 128 characters \[agent-version\]/);

  // The version in the status the registration carries counts as much.
  const inStatus = await register('statusversion', WORKER, { agentVersion: '2.0\u009b2J' });
  assert.equal(inStatus?.code, Status.INVALID_ARGUMENT);
  assert.match(inStatus!.details, /register\.agentVersion: the agent version "2\.0\\u009b2J" contains the control character U\+009B/);
  await assertNotStored('statusversion');
});

test('a later status report with such a version ends the stream; what was stored keeps its version', async () => {
  const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('later'), name: 'later', labels: WORKER });
  agents.push(agent);
  await agent.connect();
  assert.equal(agent.error, undefined);
  agent.report({ agentVersion: '3.0\u001b[2J' });
  await agent.waitFor(() => agent.error !== undefined);
  assert.equal(agent.error!.code, Status.INVALID_ARGUMENT);
  assert.match(agent.error!.details, /Node\/later: status\.agentVersion: the agent version "3\.0\\u001b\[2J" contains the control character U\+001B/);
  const node = await call(c, c.status.getNode.bind(c.status), { name: 'later' }, 'get node');
  assert.equal(node.status!.agentVersion, 'simulated');
});
