// A Watch client that stops reading (a hung dashboard, `mcctl get nodes -w` in a stopped
// terminal) must not make the server hold every event for it: past its initial list and the
// backlog, its stream is cut with RESOURCE_EXHAUSTED and a status that says what to do, while a
// client that keeps reading goes on. Real gRPC over mTLS; agents report on the real protocol.

import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { call } from '../../src/cli/client/call.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const BACKLOG = 50;

let server: TestServer | undefined;
let agents: SimulatedAgent[] = [];
afterEach(async () => {
  for (const a of agents) a.close();
  await server?.close();
  agents = [];
  server = undefined;
});

test('a Watch client that stops reading is cut after its backlog with RESOURCE_EXHAUSTED; one that reads goes on', async () => {
  server = await startTestServer({ watchBacklog: BACKLOG });
  const c = server.admin();
  for (let i = 0; i < 8; i++) {
    const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(`n${i}`), name: `n${i}` });
    await agent.connect();
    agents.push(agent);
  }
  await eventually(async () => (await call(c, c.status.listNodes.bind(c.status), { pool: '', limit: 0, continueToken: '' }, 'list')).nodes.length === 8, 10_000, 'every node listed');

  // Opened side by side: one takes its first event and then stops reading (its buffer, then
  // its HTTP/2 stream's window fill, then the server's buffer), the other reads everything.
  const stalled = c.status.watch({ nodes: true });
  stalled.once('data', () => stalled.pause());
  const reader = c.status.watch({ nodes: true });
  let readerEvents = 0;
  let readerError: unknown;
  reader.on('data', () => readerEvents++);
  reader.on('error', (err) => { readerError = err; });

  // Every node reports a new, long reason every few milliseconds: each status batch is a
  // MODIFIED event per node, about 4 KiB each.
  let round = 0;
  const churn = setInterval(() => {
    round++;
    for (const a of agents) a.report({ state: 'Working', reason: `step ${round}: ${'x'.repeat(4000)}` });
  }, 20);
  try {
    await eventually(() => server!.logs.some((l) => l.includes('Watch client too slow; stream cut')), 30_000, 'the stalled stream cut');
  } finally {
    clearInterval(churn);
  }

  // The client sees the status once it reads what was sent before the cut.
  const status = await new Promise<{ code: number; details: string }>((resolve) => {
    stalled.on('error', (err: { code: number; details: string }) => resolve(err));
    stalled.resume();
  });
  assert.equal(status.code, Status.RESOURCE_EXHAUSTED);
  assert.match(status.details, /^watch cut: this client read its events too slowly; watch again to get the current state \(\d+ events unread; the bound is \d+\)$/);
  const bound = Number(/the bound is (\d+)/.exec(status.details)![1]);
  assert.ok(bound >= BACKLOG && bound <= BACKLOG + 8 + 1, `the bound is the initial list (8 nodes and SYNCED at most) plus the backlog: ${bound}`);

  // The reading client was not cut, still gets events, and the server still answers.
  const before = readerEvents;
  agents[0]!.report({ state: 'Done', reason: '' });
  await eventually(() => readerEvents > before, 5000, 'the reading client still gets events');
  assert.equal(readerError, undefined, 'the reading client was not cut');
  assert.equal(server.logs.filter((l) => l.includes('Watch client too slow')).length, 1, 'only the stalled client was cut');
  reader.cancel();
});
