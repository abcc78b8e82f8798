// A bootstrap token serves one pool (issue 17, hole 1). The worker token sits in every worker's
// Ignition pointer config; on the old server it fetched GET /config/master (master's password
// hash, SSH keys and files, and a master enrollment token, which /enroll turned into an
// OU=master certificate). Now: 403 for any other pool, and tokens per pool from
// `mcctl pki token create --pool P [--ttl]`, listed and deleted like any object.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { identityOf } from '../../src/runtime/pki.ts';
import { bootstrapFetch, enrollHost, ignitionFile } from '../helpers/bootstrap-client.ts';
import { masterSecretManifests } from '../helpers/manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { serverFixture } from '../helpers/server-fixture.ts';
import { scaled } from '../helpers/time-scale.ts';
import { readFileSync } from 'node:fs';

const WORKER_TOKEN = 'test-bootstrap-token';
const { server, c } = serverFixture({ bootstrap: { issueRate: { burst: 1000, perMinute: 1000 }, failureRate: { burst: 1000, perMinute: 1000 } } }, async () => {
  await call(c, c.config.apply.bind(c.config), { manifests: masterSecretManifests('master-secret=1'), dryRun: false }, 'apply');
});

const cli = (...args: string[]) => runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', ...args]);

test('the worker token cannot fetch master\'s config: 403 naming its pool, and no enrollment token issued', async () => {
  const master = await bootstrapFetch(server, '/config/master', { token: WORKER_TOKEN });
  assert.equal(master.status, 403);
  assert.match(master.body.error, /serves pool worker only; it cannot fetch MachineConfigPool\/master/);
  assert.equal(JSON.stringify(master.body).includes('master-secret'), false);
  const worker = await bootstrapFetch(server, '/config/worker', { token: WORKER_TOKEN });
  assert.equal(worker.status, 200);
  // The file's master token serves master, and only master.
  const masterToken = 'test-master-bootstrap-token';
  assert.equal((await bootstrapFetch(server, '/config/master', { token: masterToken })).status, 200);
  assert.equal((await bootstrapFetch(server, '/config/worker', { token: masterToken })).status, 403);
});

test('the enrollment token inside a worker config enrolls into worker only: the certificate is OU=worker and the node never gets master\'s config', async () => {
  const tls = await enrollHost(server, 'worker', WORKER_TOKEN, 'scoped-1');
  assert.equal(identityOf(readFileSync(tls.cert)).organizationalUnit, 'worker');
  const agent = new SimulatedAgent({ address: server.address, tls, name: 'scoped-1', labels: { 'node-role.kubernetes.io/master': '' }, autoDone: true });
  await agent.connect();
  try {
    assert.equal(agent.pool, 'worker');
    await agent.waitFor(() => agent.lastAssignment !== undefined);
    const master = (await call(c, c.status.getPool.bind(c.status), { name: 'master' }, 'get pool')).status!.configuration;
    assert.ok(agent.assignments.every((a) => a.renderedConfig !== master));
  } finally {
    agent.close();
  }
});

test('mcctl pki token create --pool infra --ttl: prints the token once; it serves infra only; get tokens lists it; delete token ends it', async () => {
  const made = await cli('pki', 'token', 'create', '--pool', 'infra', '--ttl', '2h', '--description', 'rack 7 install');
  assert.equal(made.status, 0, made.stderr);
  const token = made.stdout.trim();
  assert.match(token, /^[a-z0-9]{6}\.[A-Za-z0-9_-]{43}$/);
  const id = token.slice(0, 6);
  assert.match(made.stderr, new RegExp(`bootstrap token ${id} for pool infra, valid until \\d{4}-`));

  const infra = await bootstrapFetch(server, '/config/infra', { token });
  assert.equal(infra.status, 200);
  assert.ok(ignitionFile(infra.body, '/etc/mcplane/enrollment-token'));
  assert.equal((await bootstrapFetch(server, '/config/master', { token })).status, 403);
  assert.equal((await bootstrapFetch(server, '/config/worker', { token })).status, 403);
  // Right id, wrong secret: refused like any unknown token.
  assert.equal((await bootstrapFetch(server, '/config/infra', { token: `${id}.${'A'.repeat(43)}` })).status, 403);

  const listed = await cli('get', 'tokens');
  assert.equal(listed.status, 0, listed.stderr);
  assert.match(listed.stdout, /^ID\s+POOL\s+EXPIRES\s+DESCRIPTION\s+AGE/m);
  assert.match(listed.stdout, new RegExp(`^${id}\\s+infra\\s+in (119m|120m)\\s+rack 7 install\\s`, 'm'));
  assert.ok(!listed.stdout.includes(token.slice(7)), 'the secret is never listed');
  const yaml = await cli('get', 'token', id, '-o', 'yaml');
  assert.match(yaml.stdout, /kind: BootstrapToken/);
  assert.match(yaml.stdout, /pool: infra/);

  const deleted = await cli('delete', 'token', id);
  assert.equal(deleted.status, 0, deleted.stderr);
  assert.match(deleted.stdout, new RegExp(`bootstraptoken/${id} deleted`));
  const after = await bootstrapFetch(server, '/config/infra', { token });
  assert.equal(after.status, 403);
  const gone = await cli('delete', 'token', id);
  assert.notEqual(gone.status, 0);
  assert.match(gone.stderr, new RegExp(`BootstrapToken/${id} not found`));
});

test('an expired token serves nothing; a bad --ttl or pool is a clear error', async () => {
  // A life long enough for the first fetch on a busy machine (a fixed 300 ms ran out before it at
  // load 15 on two cores), and a wait past it.
  const ttlMs = scaled(1_000);
  const made = await call(c, c.identity.createBootstrapToken.bind(c.identity), { pool: 'worker', ttlMs, description: '' }, 'create');
  const createdAt = Date.now();
  assert.equal((await bootstrapFetch(server, '/config/worker', { token: made.token })).status, 200);
  await new Promise((r) => setTimeout(r, createdAt + ttlMs + 100 - Date.now()));
  const expired = await bootstrapFetch(server, '/config/worker', { token: made.token });
  assert.equal(expired.status, 403);
  assert.match(expired.body.error, /not valid \(unknown, deleted or expired\)/);
  const badTtl = await cli('pki', 'token', 'create', '--pool', 'worker', '--ttl', 'soon');
  assert.notEqual(badTtl.status, 0);
  assert.match(badTtl.stderr, /--ttl soon: give a duration/);
  const badPool = await cli('pki', 'token', 'create', '--pool', 'Not_A_Pool');
  assert.notEqual(badPool.status, 0);
  assert.match(badPool.stderr, /BootstrapToken\/<new>: pool: pool "Not_A_Pool" must be a DNS subdomain/);
});

test('a node certificate cannot make or list bootstrap tokens', async () => {
  const agentTls = await server.pki.node('token-thief', 'worker');
  const r = await runCliAsync(['--server', server.address, '--ca', agentTls.ca, '--cert', agentTls.cert, '--key', agentTls.key, '--config', '/dev/null', 'pki', 'token', 'create', '--pool', 'master']);
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /needs O=mcplane:admins/);
});
