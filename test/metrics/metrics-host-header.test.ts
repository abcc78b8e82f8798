// Both /metrics endpoints (mcplane-server's and a real mcplane-agent's on a sandboxed host)
// answer only requests whose Host names them: a browser page on evil.example whose name was
// rebound to 127.0.0.1 sends `Host: evil.example` and gets 421, not the metrics; Prometheus,
// which scrapes by address or host name, gets them.

import assert from 'node:assert/strict';
import { request } from 'node:http';
import { hostname } from 'node:os';
import { after, before, test } from 'node:test';
import { acceptsMetricsHost } from '../../src/runtime/metrics-http.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const noSystemd = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let server: TestServer;
let host: SandboxHost | undefined;

/** GET /metrics on 127.0.0.1:port with this Host header (fetch cannot set one). */
function get(port: number, hostHeader: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/metrics', headers: { host: hostHeader } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => { body += d; }).on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject).end();
  });
}

async function checkEndpoint(port: number, metric: string): Promise<void> {
  for (const evil of ['evil.example', `evil.example:${port}`, `127.0.0.1.evil.example:${port}`, 'localhost.evil.example', `${hostname()}.evil.example`]) {
    const r = await get(port, evil);
    assert.equal(r.status, 421, `Host: ${evil}`);
    assert.match(r.body, /^misdirected request: this \/metrics answers only to its IP address, localhost or the host name of its machine\n$/);
    assert.ok(!r.body.includes(metric));
  }
  for (const good of [`127.0.0.1:${port}`, '127.0.0.1', `[::1]:${port}`, `localhost:${port}`, `${hostname()}:${port}`, hostname().toUpperCase(), `10.1.2.3:${port}`]) {
    const r = await get(port, good);
    assert.equal(r.status, 200, `Host: ${good}: ${r.body}`);
    assert.match(r.body, new RegExp(`^${metric}`, 'm'), `Host: ${good}`);
  }
}

before(async () => {
  server = await startTestServer({ metrics: { listen: '127.0.0.1:0' } });
});
after(async () => {
  await host?.kill();
  await server.close();
});

test('the rule: IP literals, localhost, this machine\'s name and the names given; nothing else', () => {
  for (const ok of ['127.0.0.1', '127.0.0.1:9624', '192.0.2.7:80', '[::1]', '[::1]:9624', '[2001:db8::1]:1', 'localhost', 'LOCALHOST:1', hostname(), `${hostname()}.:9624`, 'node-a.example:9624']) {
    assert.equal(acceptsMetricsHost(ok, ['node-a.example']), true, ok);
  }
  for (const bad of [undefined, '', 'evil.example', 'evil.example:9624', '::1', '[evil.example]:1', '[::1', '127.0.0.1:port', '127.0.0.1:9624:1', '127.1', 'localhost.evil.example', 'node-a.example']) {
    assert.equal(acceptsMetricsHost(bad), false, String(bad));
  }
});

test('mcplane-server\'s /metrics refuses Host: evil.example with 421 and answers its address', async () => {
  await checkEndpoint(server.handle.metricsPort!, 'mco_machine_count');
});

test('mcplane-agent\'s /metrics refuses Host: evil.example with 421 and answers its address', { skip: noSystemd }, async () => {
  host = new SandboxHost({ name: 'host-header', server: server.address, pki: server.pki });
  await host.start();
  let url: string | undefined;
  await eventually(() => (url = host!.metricsUrl()) !== undefined, 10_000, 'the agent\'s metrics address in its log');
  await checkEndpoint(Number(new URL(url!).port), 'mcd_state');
});
