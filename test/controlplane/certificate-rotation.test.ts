// Node certificates are short-lived and renewed over the agent's own stream (issue 17): the
// server signs a new certificate for the same node and pool and binds the node to it in one
// commit, keeping the old one accepted until the agent has switched to a stream opened with the
// new one. Lifetimes of seconds here: agents renew many times, and no stream is ever dropped and
// no RPC fails.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { certificateBinding, certificateValidity } from '../../src/runtime/pki.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

// 9 s: a stream ends with its certificate, so a renewal (at 6 s) has 3 s to land even on a loaded machine.
const LIFETIME_MS = 9000;
let server: TestServer;
let c: Clients;
const agents: SimulatedAgent[] = [];
before(async () => {
  server = await startTestServer({ signing: true, nodeCertificateLifetimeMs: LIFETIME_MS });
  c = server.admin();
});
after(async () => {
  for (const a of agents) a.close();
  await server.close();
});

/** A node certificate with the short lifetime, as enrollment on this server would issue it. */
const shortLived = (name: string, pool = 'worker') => server.pki.shortLivedNode(name, LIFETIME_MS, pool);

test('agents renew every 6 s on 9 s certificates: no stream dropped, no RPC failed, the node bound to the newest', async () => {
  const originals: Record<string, { ca: string; cert: string; key: string }> = {};
  for (const name of ['rot-1', 'rot-2', 'rot-3']) {
    originals[name] = await shortLived(name, name === 'rot-3' ? 'master' : 'worker');
    const a = new SimulatedAgent({ address: server.address, tls: originals[name], name, autoRenew: true, autoDone: true });
    agents.push(a);
    await a.connect();
    assert.equal(a.error, undefined);
  }
  // Operators' calls go on throughout; none may fail.
  let rpcs = 0;
  const failures: string[] = [];
  const deadline = Date.now() + 3.5 * LIFETIME_MS;
  while (Date.now() < deadline) {
    for (const a of agents) {
      try {
        const got = await call(c, c.status.getNode.bind(c.status), { name: a.options.name }, 'get node');
        if (!got.status?.connected) failures.push(`${a.options.name} not connected at ${Date.now()}`);
        rpcs++;
      } catch (err) {
        failures.push((err as Error).message);
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual(failures, [], `${failures.length} of ${rpcs} calls failed`);
  for (const a of agents) {
    assert.ok(a.renewals.length >= 4, `${a.options.name} renewed ${a.renewals.length} times`);
    assert.equal(a.drops, 0, `${a.options.name}: a stream was dropped (${a.error?.details})`);
    assert.equal(a.error, undefined);
    assert.deepEqual(a.renewalFailures, []);
    // Still alive past its first certificate's end: it runs on a renewed one.
    assert.ok(certificateValidity(a.certificatePem).notAfter > Date.now());
  }
  // The pool binding is kept: rot-3 is master on every certificate. (A renewal may be between
  // its two streams right now: the pool is known again once the new one registers.)
  await eventually(() => agents[2]!.pool !== undefined, 5000, 'rot-3 registered');
  assert.equal(agents[2]!.pool, 'master');
  assert.match(certificateValidity(agents[2]!.certificatePem).subject, /OU=master/);
});

test('the node record holds the new certificate, and the one it renewed from only until the switch', async () => {
  const files = await shortLived('rot-bind');
  const a = new SimulatedAgent({ address: server.address, tls: files, name: 'rot-bind' });
  agents.push(a);
  await a.connect();
  const first = certificateBinding(a.certificatePem);
  await a.renew();
  const second = certificateBinding(a.certificatePem);
  assert.notEqual(first.sha256, second.sha256);
  assert.equal(a.drops, 0);
  // Registered with the new one: the old certificate is refused from now on.
  const replay = new SimulatedAgent({ address: server.address, tls: files, name: 'rot-bind' });
  agents.push(replay);
  await replay.connect();
  assert.equal(replay.error?.code, Status.PERMISSION_DENIED);
  assert.match(replay.error!.details, /bound to another certificate/);
  // The renewed agent is untouched by the refused attempt.
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(a.drops, 0);
  assert.ok((await call(c, c.status.getNode.bind(c.status), { name: 'rot-bind' }, 'get')).status!.connected);
});

test('a replica without the CA key answers a renewal with an error, and the stream stays', async () => {
  const unsigned = await startTestServer({});
  try {
    const files = await shortLived('rot-nokey');
    const a = new SimulatedAgent({ address: unsigned.address, tls: files, name: 'rot-nokey' });
    agents.push(a);
    await a.connect();
    await assert.rejects(a.renew(), (err: Error & { code?: string }) => err.code === 'MCPLANE_PRECONDITION_FAILED' && /holds no CA key/.test(err.message));
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(a.drops, 0);
    assert.equal(a.error, undefined);
  } finally {
    await unsigned.close();
  }
});
