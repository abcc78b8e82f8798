// A node name is an RFC 1123 subdomain everywhere one is accepted (issue 31): "a..b" (an empty
// label), "a.-b" or "-a" used to pass the endpoint's and the stream's checks, which only looked
// at the characters. Each door refuses it now, naming the rule.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { parseAgentConfig } from '../../src/agent/agent-config.ts';
import { isDnsSubdomain, nodeNameProblem } from '../../src/machineconfig/index.ts';
import { createCertificateRequest } from '../../src/runtime/pki.ts';
import { bootstrapFetch, ignitionFile, requestEnrollment } from '../helpers/bootstrap-client.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const BAD = ['a..b', 'a.-b', 'a-.b', '.a', 'a.', `${'a'.repeat(250)}.bcd`];
const GOOD = ['a', 'a.b', 'node-1.example.com', '1-2.3', 'a'.repeat(253)];

let server: TestServer;
before(async () => {
  server = await startTestServer({ bootstrap: { failureRate: { burst: 1000, perMinute: 1000 }, issueRate: { burst: 1000, perMinute: 1000 } } });
});
after(() => server.close());

test('the rule: dot-separated labels, each starting and ending with a letter or digit, at most 253 characters', () => {
  for (const name of GOOD) assert.equal(nodeNameProblem(name), undefined, name);
  for (const name of BAD) {
    assert.equal(isDnsSubdomain(name), false, name);
    assert.match(nodeNameProblem(name)!, /must be an RFC 1123 subdomain \(rule rfc1123-subdomain/);
  }
  assert.match(nodeNameProblem('a..b')!, /^"a\.\.b" is not a DNS subdomain: it has an empty label/);
});

test('POST /enrollment-requests refuses "a..b" with 400 naming the rule', async () => {
  for (const name of ['a..b', 'a.-b']) {
    const asked = await requestEnrollment(server, name, 'worker');
    assert.equal(asked.status, 400, `${name}: ${JSON.stringify(asked.body)}`);
    assert.match(asked.body.error, /^nodeName "a\.[.-]b" .*RFC 1123 subdomain \(rule rfc1123-subdomain/);
  }
  assert.equal((await requestEnrollment(server, 'a.b', 'worker')).status, 202);
});

test('POST /enroll refuses "a..b" with 400 naming the rule, and the token stays unused', async () => {
  const served = await bootstrapFetch(server, '/config/worker', { token: 'test-bootstrap-token' });
  const token = ignitionFile(served.body, '/etc/mcplane/enrollment-token');
  const { csrPem } = await createCertificateRequest('x');
  const bad = await bootstrapFetch(server, '/enroll', { method: 'POST', body: { token, nodeName: 'a..b', csr: csrPem } });
  assert.equal(bad.status, 400, JSON.stringify(bad.body));
  assert.match(bad.body.error, /rule rfc1123-subdomain/);
  const good = await bootstrapFetch(server, '/enroll', { method: 'POST', body: { token, nodeName: 'c.d', csr: csrPem } });
  assert.equal(good.status, 200, JSON.stringify(good.body));
});

test('a certificate for "a..b" cannot register: INVALID_ARGUMENT naming the rule, and no node', async () => {
  const tls = await server.pki.node('a..b', 'worker');
  const agent = new SimulatedAgent({ address: server.address, tls, name: 'a..b' });
  await agent.connect().catch(() => undefined);
  agent.close();
  assert.equal(agent.error?.code, Status.INVALID_ARGUMENT, `registered: ${agent.pool}`);
  assert.match(agent.error!.details, /register\.nodeName.*rfc1123-subdomain|rfc1123-subdomain.*register\.nodeName/);
  assert.equal(server.handle.controlPlane.cache.nodeRecords.has('a..b'), false);
});

test('mcctl pki node and agent.yaml refuse "a..b" naming the rule', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pki-'));
  assert.equal((await runCliAsync(['pki', 'init', dir])).status, 0);
  const r = await runCliAsync(['pki', 'node', 'a..b', '--pki-dir', dir]);
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /node name "a\.\.b" is not a DNS subdomain: it has an empty label .*rule rfc1123-subdomain/);
  assert.throws(() => parseAgentConfig({ server: 'cp:7443', insecure: true, nodeName: 'a..b' }), /nodeName.*rule rfc1123-subdomain/);
});
