// An agent that asks to join may wait hours for an operator, longer than systemd lets a
// Type=notify service take to start (TimeoutStartSec, 10 minutes in the shipped unit). Each poll
// extends the start (EXTEND_TIMEOUT_USEC) and says what the host waits for in the unit's status.
// The agent runs as a real Type=notify service under a systemd user manager, with a start
// timeout of 5 s; without the extensions systemd would fail and restart it.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd, startUserSystemd, type UserSystemd } from '../../sandbox/user-systemd.ts';
import { installAgentUnit } from '../helpers/agent-unit.ts';
import { programArgs, runCliAsync } from '../helpers/run-cli.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let server: TestServer;
let systemd: UserSystemd;
const UNIT = 'mcplane-agent-enrollment-wait.service';
const show = (prop: string) => systemd.systemctl('show', '-p', prop, '--value', UNIT).stdout.trim();

before(async () => {
  if (skip) return;
  server = await startTestServer({ bootstrap: { failureRate: { burst: 1000, perMinute: 1000 }, requestRate: { burst: 1000, perMinute: 1000 } } });
  systemd = await startUserSystemd();
});
after(async () => {
  if (skip) return;
  systemd.systemctl('stop', UNIT);
  await systemd.stop();
  await server.close();
});

test('waiting for approval outlasts TimeoutStartSec: the start is extended each poll and the status says why', { skip, timeout: 90_000 }, async () => {
  const config: Record<string, unknown> = {
    enrollment: { url: `https://localhost:${server.handle.bootstrapPort}/enrollment-requests`, pool: 'worker', pollSeconds: 0.3 },
  };
  const host = new SandboxHost({ name: 'waits-long', server: server.address, pki: server.pki, systemd, config });
  // No certificate yet: the key and the certificate it asks for go where the host keeps its state.
  config.tls = { ca: join(server.pki.dir, 'ca.crt'), cert: join(host.dir, 'node.crt'), key: join(host.dir, 'node.key') };
  await host.start();
  await host.kill(); // its config stays; systemd runs the agent from here on
  installAgentUnit(systemd, host, UNIT, { description: 'mcplane agent waiting for approval, under test', program: [process.execPath, ...programArgs('mcplane-agent')], service: ['TimeoutStartSec=5'] });
  // Starting waits until the unit is ready: not here, so without blocking.
  assert.equal(systemd.systemctl('start', '--no-block', UNIT).status, 0);
  await new Promise((r) => setTimeout(r, 11_000)); // two start timeouts and more
  const log = () => readFileSync(join(host.dir, 'agent.log'), 'utf8');
  assert.equal(show('ActiveState'), 'activating', `${systemd.systemctl('status', UNIT).stdout}\n${log()}`);
  assert.equal(show('NRestarts'), '0');
  assert.equal(show('StatusText'), 'waiting for approval to join pool worker: mcctl approve enrollment waits-long');

  // Once approved, the agent takes its certificate and is ready.
  const approved = await runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', 'approve', 'enrollment', 'waits-long']);
  assert.equal(approved.status, 0, approved.stderr);
  for (const end = Date.now() + 20_000; show('ActiveState') !== 'active'; await new Promise((r) => setTimeout(r, 100))) {
    assert.ok(Date.now() < end, `not active after the approval:\n${log()}`);
  }
  assert.match(show('StatusText'), /^node waits-long, server /);
});
