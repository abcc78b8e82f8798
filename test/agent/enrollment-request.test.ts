// The agent's side of enrollment approval: a host with no token asks to join a pool and waits
// until an operator decides (mcctl approve/deny enrollment) or an auto-approve rule does. Against
// the real bootstrap endpoint over HTTPS, with the real mcctl.

import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { parseAgentConfig } from '../../src/agent/agent-config.ts';
import { enrollIfNeeded } from '../../src/agent/enrollment.ts';
import { call } from '../../src/cli/client/call.ts';
import { createLogger } from '../../src/runtime/logger.ts';
import { identityOf } from '../../src/runtime/pki.ts';
import { poolYaml } from '../helpers/manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
const log = createLogger({ name: 'enrollment-test', level: 'silent' });
before(async () => {
  server = await startTestServer({
    bootstrap: {
      issueRate: { burst: 1000, perMinute: 1000 }, failureRate: { burst: 1000, perMinute: 1000 }, requestRate: { burst: 1000, perMinute: 1000 },
      autoApprove: [{ pool: 'worker', nodeNamePattern: 'edge-*' }],
    },
  });
  const c = server.admin();
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'infra.yaml', text: poolYaml('infra') }], dryRun: false }, 'apply');
});
after(() => server.close());

const cli = (...args: string[]) => runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', ...args]);

/** An agent config that asks to join `pool` as `node`, with its TLS files in a new directory. */
function asking(node: string, pool: string, dir = mkdtempSync(join(tmpdir(), `ask-${node}-`))) {
  const config = parseAgentConfig({
    server: server.address, nodeName: node, labels: { rack: 'r7' },
    tls: { ca: join(server.pki.dir, 'ca.crt'), cert: join(dir, 'node.crt'), key: join(dir, 'node.key') },
    enrollment: { url: `https://localhost:${server.handle.bootstrapPort}/enrollment-requests`, pool },
  }, 'agent.yaml');
  return { config, dir };
}

async function until<T>(what: string, get: () => Promise<T | undefined>): Promise<T> {
  for (const end = Date.now() + 15_000; ; await new Promise((r) => setTimeout(r, 50))) {
    const v = await get();
    if (v !== undefined) return v;
    assert.ok(Date.now() < end, `no ${what} within 15 s`);
  }
}

/** The rows of mcctl get enrollments for `node`. */
async function requestsOf(node: string): Promise<string[]> {
  const r = await cli('get', 'enrollments');
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.split('\n').filter((l) => l.split(/\s+/)[1] === node);
}

test('asks, waits through a restart with the same key (one request), and takes the certificate mcctl approve gives', async () => {
  const { config, dir } = asking('ask-1', 'infra');
  const waiting: { status: string; forMs: number }[] = [];
  const first = new AbortController();
  const asked = enrollIfNeeded(config, log, { pollMs: 50, signal: first.signal, onWaiting: (status, forMs) => waiting.push({ status, forMs }) }).then(() => undefined, (e: unknown) => e);
  await until('pending request', async () => ((await requestsOf('ask-1')).some((l) => /\sPending\s/.test(l)) ? true : undefined));
  // The key is on disk before the request is made, readable by root alone; no certificate yet.
  assert.equal(statSync(config.tls!.key).mode & 0o777, 0o600);
  assert.equal(existsSync(config.tls!.cert), false);
  const waitingStatus = 'waiting for approval to join pool infra: mcctl approve enrollment ask-1';
  await until('a waiting status', async () => (waiting.some((w) => w.status === waitingStatus) ? true : undefined));
  // Each wait extends systemd's start past itself and the request after it (30 s at most).
  assert.ok(waiting.every((w) => w.forMs >= 30_000 + 50), JSON.stringify(waiting.slice(0, 3)));

  // The agent is stopped while it waits, and started again: it polls the same request.
  first.abort();
  assert.equal((await asked as Error).name, 'AbortError');
  const polled: string[] = [];
  const again = enrollIfNeeded(asking('ask-1', 'infra', dir).config, log, { pollMs: 50, onWaiting: (status) => polled.push(status) });
  await until('the restarted agent waiting', async () => (polled.includes(waitingStatus) ? true : undefined));
  assert.equal((await requestsOf('ask-1')).length, 1, 'one request: the same key asked again');

  const approved = await cli('approve', 'enrollment', 'ask-1');
  assert.equal(approved.status, 0, approved.stderr);
  await again;
  const cert = readFileSync(config.tls!.cert);
  assert.deepEqual(identityOf(cert), { commonName: 'ask-1', organization: 'mcplane:nodes', organizationalUnit: 'infra' });
  assert.ok(new X509Certificate(cert).checkPrivateKey(createPrivateKey(readFileSync(config.tls!.key))), 'the certificate is for the key kept on disk');
  // A host that has its certificate asks nothing.
  await enrollIfNeeded(config, log, { pollMs: 50 });
});

test('denied: the agent keeps waiting, never restarting, and says the operator\'s reason; no certificate is written', async () => {
  const { config } = asking('ask-2', 'infra');
  const said: string[] = [];
  const stop = new AbortController();
  const asked = enrollIfNeeded(config, log, { pollMs: 50, signal: stop.signal, onWaiting: (status) => said.push(status) }).then(() => undefined, (err: unknown) => err);
  await until('pending request', async () => ((await requestsOf('ask-2')).length > 0 ? true : undefined));
  const denied = await cli('deny', 'enrollment', 'ask-2', '--reason', 'not one of our racks');
  assert.equal(denied.status, 0, denied.stderr);
  await until('the denial', async () => (said.includes('denied: not one of our racks') ? true : undefined));
  assert.equal(existsSync(config.tls!.cert), false);
  stop.abort();
  assert.equal((await asked as Error).name, 'AbortError');
});

test('a host an auto-approve rule matches gets its certificate at once; a refused request is said and asked again later, not an exit', async () => {
  const { config } = asking('edge-7', 'worker');
  await enrollIfNeeded(config, log, { pollMs: 50 });
  assert.deepEqual(identityOf(readFileSync(config.tls!.cert)), { commonName: 'edge-7', organization: 'mcplane:nodes', organizationalUnit: 'worker' });

  // The same key asking under another name: 409, which waiting would not change.
  const { config: renamed } = asking('ask-3', 'infra');
  const { config: other } = asking('ask-4', 'infra', join(renamed.tls!.key, '..'));
  const stop = new AbortController();
  const pending = enrollIfNeeded(renamed, log, { pollMs: 50, signal: stop.signal }).then(() => undefined, (e: unknown) => e);
  const said: string[] = [];
  try {
    await until('pending request', async () => ((await requestsOf('ask-3')).length > 0 ? true : undefined));
    const refused = enrollIfNeeded(other, log, { pollMs: 50, signal: stop.signal, onWaiting: (status) => said.push(status) }).then(() => undefined, (e: unknown) => e);
    await until('the refusal', async () => (said.some((x) => x.startsWith('refused: this key already asked to join as ask-3 in pool infra')) ? true : undefined));
    assert.match(said.find((x) => x.startsWith('refused'))!, /; asking again in 300 s \(delete \S+node\.key to ask with a new key\)$/);
    stop.abort();
    assert.equal((await refused as Error).name, 'AbortError');
  } finally {
    stop.abort();
  }
  assert.equal((await pending as Error).name, 'AbortError');
});

test('a full queue (503 with Retry-After) is waited out, not an error: the request is made once a slot is free', async () => {
  const full = await startTestServer({ bootstrap: { failureRate: { burst: 1000, perMinute: 1000 }, requestRate: { burst: 1000, perMinute: 1000 }, maxPendingRequests: 1 } });
  try {
    const ask = (node: string, dir = mkdtempSync(join(tmpdir(), `ask-${node}-`))) => parseAgentConfig({
      server: full.address, nodeName: node,
      tls: { ca: join(full.pki.dir, 'ca.crt'), cert: join(dir, 'node.crt'), key: join(dir, 'node.key') },
      enrollment: { url: `https://localhost:${full.handle.bootstrapPort}/enrollment-requests`, pool: 'worker' },
    }, 'agent.yaml');
    const fullCli = (...args: string[]) => runCliAsync(['--server', full.address, '--pki-dir', full.pki.dir, '--config', '/dev/null', ...args]);
    const first = enrollIfNeeded(ask('first-in-line'), log, { pollMs: 50 });
    for (const end = Date.now() + 15_000; !/first-in-line\s+worker\s+Pending/.test((await fullCli('get', 'enrollments')).stdout); await new Promise((r) => setTimeout(r, 50))) {
      assert.ok(Date.now() < end, 'the first request was not made');
    }
    // The server asks for up to 60 s; the test caps the wait at 100 ms, as an agent caps it at 10 min.
    const secondConfig = ask('second-in-line');
    const second = enrollIfNeeded(secondConfig, log, { pollMs: 50, maxRetryAfterMs: 100 });
    await new Promise((r) => setTimeout(r, 500));
    assert.doesNotMatch((await fullCli('get', 'enrollments')).stdout, /second-in-line/, 'no room for a second pending request');
    assert.equal((await fullCli('approve', 'enrollment', 'first-in-line')).status, 0);
    await first;
    for (const end = Date.now() + 15_000; !/second-in-line\s+worker\s+Pending/.test((await fullCli('get', 'enrollments')).stdout); await new Promise((r) => setTimeout(r, 50))) {
      assert.ok(Date.now() < end, 'the second request was not made once the first was decided');
    }
    assert.equal((await fullCli('approve', 'enrollment', 'second-in-line')).status, 0);
    await second;
    assert.equal(identityOf(readFileSync(secondConfig.tls!.cert)).commonName, 'second-in-line');
  } finally {
    await full.close();
  }
});

test('a certificate that is not for this host (another key) is not written; the agent says so and asks again later', async () => {
  // A stand-in bootstrap endpoint that follows the real one's contract (POST /enrollment-requests
  // answers 200 Approved with the request's id) but sends another node's certificate, as a
  // misbehaving or impersonating server might.
  const other = await server.pki.node('someone-else', 'infra');
  const { certificateRequestKeyId } = await import('../../src/runtime/pki.ts');
  const standIn = createHttpsServer({ cert: readFileSync(join(server.pki.dir, 'server.crt')), key: readFileSync(join(server.pki.dir, 'server.key')) }, (req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', async () => {
      const csr = req.method === 'POST' ? (JSON.parse(body) as { csr: string }).csr : undefined;
      const id = csr ? await certificateRequestKeyId(csr) : req.url!.split('/').pop();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id, nodeName: 'ask-5', pool: 'infra', state: 'Approved', certificate: readFileSync(other.cert, 'utf8') }));
    });
  });
  await new Promise<void>((r) => standIn.listen(0, '127.0.0.1', r));
  try {
    const dir = mkdtempSync(join(tmpdir(), 'ask-5-'));
    const config = parseAgentConfig({
      server: server.address, nodeName: 'ask-5',
      tls: { ca: join(server.pki.dir, 'ca.crt'), cert: join(dir, 'node.crt'), key: join(dir, 'node.key') },
      enrollment: { url: `https://localhost:${(standIn.address() as AddressInfo).port}/enrollment-requests`, pool: 'infra' },
    }, 'agent.yaml');
    const said: string[] = [];
    const stop = new AbortController();
    const asked = enrollIfNeeded(config, log, { pollMs: 50, signal: stop.signal, onWaiting: (status) => said.push(status) }).then(() => undefined, (e: unknown) => e);
    await until('the refusal of the certificate', async () => (said.some((x) => x.startsWith('the approved certificate cannot be used')) ? true : undefined));
    assert.equal(said.find((x) => x.startsWith('the approved'))!, 'the approved certificate cannot be used (it is not for the key this host asked with); asking again in 300 s');
    assert.equal(existsSync(config.tls!.cert), false);
    stop.abort();
    assert.equal((await asked as Error).name, 'AbortError');
  } finally {
    standIn.close();
  }
});

test('a kept key file that is not a usable key stops the agent with an error naming the file and what to do', async () => {
  const { config } = asking('ask-6', 'infra');
  writeFileSync(config.tls!.key, 'not a key\n', { mode: 0o600 });
  await assert.rejects(enrollIfNeeded(config, log, { pollMs: 50 }), (err: Error) => err.name === 'ConfigurationError'
    && err.message.startsWith(`${config.tls!.key} is not a P-256 private key in PKCS#8 PEM, which a request to join is made with (`)
    && err.message.endsWith(`); delete it (and ${config.tls!.cert} if it exists) to ask with a new key`));
});
