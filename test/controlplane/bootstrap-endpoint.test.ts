// The Ignition bootstrap endpoint: token required, version negotiated, enrollment signs a CSR.

import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { negotiateVersion } from '../../src/controlplane/api/bootstrap-server.ts';
import { createCertificateRequest, identityOf } from '../../src/runtime/pki.ts';
import { call } from '../../src/cli/client/call.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
let ca: Buffer;
before(async () => {
  // Many config requests (and refusals) from one address here: the issuing and failure rate
  // limits, and the refusal log's budget, have tests of their own.
  server = await startTestServer({ bootstrap: { issueRate: { burst: 1000, perMinute: 1000 }, failureRate: { burst: 1000, perMinute: 1000 }, refusalLogRate: { burst: 1000, perMinute: 1000 } } });
  ca = readFileSync(join(server.pki.dir, 'ca.crt'));
});
after(() => server.close());

function fetch(path: string, options: { token?: string; accept?: string; method?: string; body?: unknown } = {}) {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: any }>((resolve, reject) => {
    const headers: Record<string, string> = {};
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    if (options.accept) headers.accept = options.accept;
    const req = request({ host: '127.0.0.1', port: server.handle.bootstrapPort, path, method: options.method ?? 'GET', ca, servername: 'localhost', headers }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(options.body === undefined ? undefined : JSON.stringify(options.body));
  });
}

const TOKEN = 'test-bootstrap-token';
const fileText = (ign: any, path: string) => {
  const f = ign.storage.files.find((x: any) => x.path === path);
  return f && Buffer.from(f.contents.source.slice(f.contents.source.indexOf(',') + 1), 'base64').toString();
};

test('no token: 401; a wrong token: 403; an unknown pool: 404', async () => {
  const none = await fetch('/config/worker');
  assert.equal(none.status, 401);
  assert.match(String(none.headers['www-authenticate']), /Bearer/);
  assert.equal((await fetch('/config/worker', { token: 'nope' })).status, 403);
  // A worker's token does not even say whether another pool exists.
  const other = await fetch('/config/gpu', { token: TOKEN });
  assert.equal(other.status, 403);
  assert.match(other.body.error, /serves pool worker only; it cannot fetch MachineConfigPool\/gpu/);
  const c = server.admin();
  const gpu = await call(c, c.identity.createBootstrapToken.bind(c.identity), { pool: 'gpu', ttlMs: 0, description: '' }, 'create token');
  const unknown = await fetch('/config/gpu', { token: gpu.token });
  assert.equal(unknown.status, 404);
  assert.match(unknown.body.error, /MachineConfigPool\/gpu does not exist/);
});

test('Ignition version follows the Accept header: 3.x as asked, 2.2 when asked, 3.4.0 by default', async () => {
  const dflt = await fetch('/config/worker', { token: TOKEN });
  assert.equal(dflt.status, 200);
  assert.equal(dflt.body.ignition.version, '3.4.0');
  assert.equal(dflt.headers['content-type'], 'application/vnd.coreos.ignition+json; version=3.4.0');
  const v32 = await fetch('/config/worker', { token: TOKEN, accept: 'application/vnd.coreos.ignition+json;version=3.2.0, */*;q=0.1' });
  assert.equal(v32.body.ignition.version, '3.2.0');
  const v22 = await fetch('/config/worker', { token: TOKEN, accept: 'application/vnd.coreos.ignition+json; version=2.2.0' });
  assert.equal(v22.body.ignition.version, '2.2.0');
  assert.ok(v22.body.storage.files.every((f: any) => f.filesystem === 'root'));
  assert.equal(negotiateVersion('application/vnd.coreos.ignition+json;version=3.9.0'), '3.5.0');
  assert.equal(negotiateVersion('application/vnd.coreos.ignition+json;version=2.1.0'), undefined);
  assert.equal((await fetch('/config/worker', { token: TOKEN, accept: 'application/vnd.coreos.ignition+json;version=2.1.0' })).status, 406);
});

test('the served config carries the agent config, the CA, an enrollment token and the agent unit', async () => {
  const res = await fetch('/config/worker', { token: TOKEN });
  const agentConfig = parse(fileText(res.body, '/etc/mcplane/agent.yaml'));
  assert.deepEqual(agentConfig.servers, [server.address], 'every replica the agent may use (here the only one)');
  assert.deepEqual(agentConfig.labels, { 'node-role.kubernetes.io/worker': '' });
  assert.match(agentConfig.enrollment.url, /^https:\/\/127\.0\.0\.1:\d+\/enroll$/);
  assert.equal(fileText(res.body, '/etc/mcplane/pki/ca.crt'), ca.toString());
  const tokenFile = res.body.storage.files.find((f: any) => f.path === '/etc/mcplane/enrollment-token');
  assert.equal(tokenFile.mode, 0o600);
  assert.deepEqual(res.body.systemd.units.find((u: any) => u.name === 'mcplane-agent.service'), { name: 'mcplane-agent.service', enabled: true });
});

test('enrollment: a single-use token buys a node certificate, which then connects as that node', async () => {
  const res = await fetch('/config/worker', { token: TOKEN });
  const token = fileText(res.body, '/etc/mcplane/enrollment-token');
  const { csrPem, keyPem } = await createCertificateRequest('whatever-the-host-says');
  const enrolled = await fetch('/enroll', { method: 'POST', body: { token, nodeName: 'fresh-host', csr: csrPem } });
  assert.equal(enrolled.status, 200, JSON.stringify(enrolled.body));
  assert.deepEqual(identityOf(enrolled.body.certificate), { commonName: 'fresh-host', organization: 'mcplane:nodes', organizationalUnit: 'worker' }, 'bound to the pool it enrolled for');

  const again = await fetch('/enroll', { method: 'POST', body: { token, nodeName: 'other-host', csr: csrPem } });
  assert.equal(again.status, 403);
  assert.match(again.body.error, /already used by node fresh-host/);

  const dir = mkdtempSync(join(tmpdir(), 'enrolled-'));
  writeFileSync(join(dir, 'node.crt'), enrolled.body.certificate);
  writeFileSync(join(dir, 'node.key'), keyPem);
  const agent = new SimulatedAgent({ address: server.address, tls: { ca: join(server.pki.dir, 'ca.crt'), cert: join(dir, 'node.crt'), key: join(dir, 'node.key') }, name: 'fresh-host' });
  await agent.connect();
  assert.equal(agent.error, undefined);
  assert.equal(agent.pool, 'worker');
  agent.close();

  const second = await fetch('/config/worker', { token: TOKEN });
  const taken = await fetch('/enroll', { method: 'POST', body: { token: fileText(second.body, '/etc/mcplane/enrollment-token'), nodeName: 'fresh-host', csr: csrPem } });
  assert.equal(taken.status, 409);
  assert.match(taken.body.error, /already registered/);
  const bad = await fetch('/enroll', { method: 'POST', body: { token: 'x', nodeName: 'Bad Name', csr: '' } });
  assert.equal(bad.status, 400);
  assert.equal((await fetch('/enroll', { method: 'POST', body: { token: 'made-up', nodeName: 'h', csr: csrPem } })).status, 403);
});

test('advertised addresses: the bound port, and the host name for a wildcard listen address', async () => {
  const { reachableAddress } = await import('../../src/controlplane/api/bootstrap-server.ts');
  const { hostname } = await import('node:os');
  assert.equal(reachableAddress('0.0.0.0', 7443), `${hostname()}:7443`);
  assert.equal(reachableAddress('[::]', 7443), `${hostname()}:7443`);
  assert.equal(reachableAddress('10.0.0.5', 22623), '10.0.0.5:22623');
  const res = await fetch('/config/worker', { token: TOKEN });
  const agentConfig = parse(fileText(res.body, '/etc/mcplane/agent.yaml'));
  assert.equal(agentConfig.enrollment.url, `https://127.0.0.1:${server.handle.bootstrapPort}/enroll`);
});

test('enrollment races: two hosts enrolling one new name get one certificate and one 409; one token used at once by many gets one success and 4xx for the rest, never 5xx', async () => {
  const { csrPem } = await createCertificateRequest('race');
  const freshToken = async (): Promise<string> => fileText((await fetch('/config/worker', { token: TOKEN })).body, '/etc/mcplane/enrollment-token');
  const [a, b] = [await freshToken(), await freshToken()];
  const sameName = await Promise.all([a, b].map((token) => fetch('/enroll', { method: 'POST', body: { token, nodeName: 'contested', csr: csrPem } })));
  assert.deepEqual(sameName.map((r) => r.status).sort(), [200, 409], JSON.stringify(sameName.map((r) => r.body)));
  assert.match(sameName.find((r) => r.status === 409)!.body.error, /Node\/contested is already registered/);

  const shared = await freshToken();
  const many = await Promise.all(Array.from({ length: 8 }, (_, i) => fetch('/enroll', { method: 'POST', body: { token: shared, nodeName: `sharer-${i}`, csr: csrPem } })));
  const statuses = many.map((r) => r.status);
  assert.equal(statuses.filter((s) => s === 200).length, 1, `one success: ${statuses}`);
  assert.ok(statuses.every((s) => s === 200 || (s >= 400 && s < 500)), `never 5xx: ${statuses}`);
});

test('a malformed pool name in the URL is a 400 and a warning naming the client, not a 500', async () => {
  const res = await fetch('/config/%', { token: TOKEN });
  assert.equal(res.status, 400);
  assert.match(res.body.error, /not valid percent-encoding/);
  assert.ok(server.logs.some((l) => l.includes('"level":"warn"') && l.includes('malformed pool name') && l.includes('"remote":"127.0.0.1"')), 'warned with the client address');
  assert.ok(!server.logs.some((l) => l.includes('bootstrap request failed')), 'no internal error logged');
});

test('every refused request is logged at warn with the client address and the reason, never a token', async () => {
  const made = await fetch('/config/worker', { token: TOKEN });
  const token = fileText(made.body, '/etc/mcplane/enrollment-token');
  const before = server.logs.length;
  await fetch('/enroll', { method: 'POST', body: { token, nodeName: 'Not A Name', csr: 'x' } });
  await fetch('/config/worker', { token: 'a-wrong-token' });
  await new Promise((r) => setTimeout(r, 50));
  const warnings = server.logs.slice(before).filter((l) => l.includes('"level":"warn"') && l.includes('bootstrap request refused'));
  assert.equal(warnings.length, 2, warnings.join('\n'));
  assert.ok(warnings.every((l) => l.includes('"remote":"127.0.0.1"')));
  assert.match(warnings[0]!, /"status":400.*is not a DNS subdomain/);
  for (const l of server.logs.slice(before)) {
    assert.ok(!l.includes(token) && !l.includes('a-wrong-token') && !l.includes(TOKEN), `no secret in: ${l}`);
  }
});
