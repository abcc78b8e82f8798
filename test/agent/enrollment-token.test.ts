// The agent's side of enrollment with a single-use token (a host bootstrapped from Ignition):
// against the real bootstrap endpoint over HTTPS. A refused token does not end the agent (under
// Restart=on-failure that meant a start every 5 s); it says why and tries again, reading the token
// file anew, so writing a new token mends it without a restart.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { parseAgentConfig } from '../../src/agent/agent-config.ts';
import { enrollIfNeeded } from '../../src/agent/enrollment.ts';
import { createLogger } from '../../src/runtime/logger.ts';
import { identityOf } from '../../src/runtime/pki.ts';
import { staticTokenFor } from '../../src/controlplane/api/bootstrap-tokens.ts';
import { bootstrapFetch, ignitionFile } from '../helpers/bootstrap-client.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
const log = createLogger({ name: 'enrollment-token-test', level: 'silent' });
before(async () => {
  server = await startTestServer({ bootstrap: { issueRate: { burst: 1000, perMinute: 1000 }, failureRate: { burst: 1000, perMinute: 1000 } } });
});
after(() => server.close());

/** A fresh single-use enrollment token, as Ignition from GET /config/worker carries it. */
async function enrollmentToken(): Promise<string> {
  const served = await bootstrapFetch(server, '/config/worker', { token: staticTokenFor(readFileSync(join(server.pki.dir, 'bootstrap-token'), 'utf8'), 'worker') });
  assert.equal(served.status, 200, JSON.stringify(served.body));
  return ignitionFile(served.body, '/etc/mcplane/enrollment-token')!;
}

function withToken(node: string, token: string) {
  const dir = mkdtempSync(join(tmpdir(), `token-${node}-`));
  writeFileSync(join(dir, 'enrollment-token'), token, { mode: 0o600 });
  return parseAgentConfig({
    server: server.address, nodeName: node,
    tls: { ca: join(server.pki.dir, 'ca.crt'), cert: join(dir, 'node.crt'), key: join(dir, 'node.key') },
    enrollment: { url: `https://localhost:${server.handle.bootstrapPort}/enroll`, tokenFile: join(dir, 'enrollment-token') },
  }, 'agent.yaml');
}

test('a token enrolls the host; a used one is said and tried again, and a new token in the file mends it without a restart', async () => {
  const token = await enrollmentToken();
  const first = withToken('token-a', token);
  await enrollIfNeeded(first, log);
  assert.deepEqual(identityOf(readFileSync(first.tls!.cert)), { commonName: 'token-a', organization: 'mcplane:nodes', organizationalUnit: 'worker' });

  const second = withToken('token-b', token); // the same token, already used
  const said: string[] = [];
  const stop = new AbortController();
  const enrolled = enrollIfNeeded(second, log, { refusedRetryMs: 200, signal: stop.signal, onWaiting: (status) => said.push(status) }).then(() => undefined, (e: unknown) => e);
  try {
    for (const end = Date.now() + 15_000; !said.some((x) => x.startsWith('refused: ')); await new Promise((r) => setTimeout(r, 50))) {
      assert.ok(Date.now() < end, `no refusal said: ${JSON.stringify(said)}`);
    }
    assert.equal(said.find((x) => x.startsWith('refused: ')), 'refused: the enrollment token was already used by node token-a; asking again in 1 s');
    assert.equal(existsSync(second.tls!.cert), false);
    writeFileSync((second.enrollment as { tokenFile: string }).tokenFile, await enrollmentToken());
    assert.equal(await enrolled, undefined, 'enrolled with the new token');
  } finally {
    stop.abort();
  }
  assert.equal(identityOf(readFileSync(second.tls!.cert)).commonName, 'token-b');
});
