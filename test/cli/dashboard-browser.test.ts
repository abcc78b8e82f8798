// mcctl dashboard in a real headless Chromium (Debian's chromium), driven over the DevTools
// protocol, against a real mcplane-server on loopback TLS. Simulated agents (the real
// AgentService protocol over mTLS) move through a rollout step by step while the test reads
// the page's DOM. MCPLANE_DASHBOARD_SCREENSHOT=docs/dashboard.png also writes the README's
// screenshot (npm run screenshot:dashboard).

import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { stringify } from 'yaml';
import { fileEntry, ign, mcDoc, poolYaml } from '../helpers/manifests.ts';
import { chromiumMissing, launchChromium, type Browser, type Page } from '../helpers/headless-chromium.ts';
import { bundlePath, REPO_ROOT, runCliAsync } from '../helpers/run-cli.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';
import { scaled } from '../helpers/time-scale.ts';

const skip = chromiumMissing;
const TMP = mkdtempSync(join(tmpdir(), 'mcplane-dashboard-test-'));

let server: TestServer;
let conn: string[];
let browser: Browser;
let page: Page;
let dashboard: Dashboard;
const agents = new Map<string, SimulatedAgent>();
const dashboards: Dashboard[] = [];

interface Dashboard {
  child: ChildProcess;
  url: string;
  out: { stdout: string; stderr: string };
  exited: Promise<number | null>;
}

/** Starts `mcctl dashboard` as a separate process (from source, or the esbuild bundle) and reads its URL. */
async function startDashboard(entry: string[] = ['--import', 'tsx', 'src/cli/main.ts']): Promise<Dashboard> {
  const child = spawn(process.execPath, [...entry, ...conn, 'dashboard'], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout!.on('data', (d) => { out.stdout += d; });
  child.stderr!.on('data', (d) => { out.stderr += d; });
  const exited = new Promise<number | null>((r) => child.once('exit', r));
  const deadline = Date.now() + 20_000;
  let m: RegExpExecArray | null;
  while (!(m = /at (http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{48})\n/.exec(out.stdout))) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`mcctl dashboard printed no URL:\n${out.stdout}\n${out.stderr}`);
    await new Promise((r) => setTimeout(r, 25));
  }
  const d = { child, url: m[1]!, out, exited };
  dashboards.push(d);
  return d;
}

async function addAgent(name: string, pool: 'master' | 'worker', zone: string): Promise<SimulatedAgent> {
  const agent = new SimulatedAgent({
    address: server.address, tls: await server.pki.node(name, pool), name,
    labels: { [`node-role.kubernetes.io/${pool}`]: '', 'topology.kubernetes.io/zone': zone },
  });
  await agent.connect();
  agents.set(name, agent);
  // Reach the pool's first config, as a node that joined earlier would have.
  await agent.waitFor(() => agent.lastAssignment !== undefined);
  const first = agent.lastAssignment!.renderedConfig;
  agent.report({ currentConfig: first, desiredConfig: first, state: 'Done', phase: 'done' });
  return agent;
}

/** What the page shows for a node, read from the DOM. */
interface RowView { bucket: string; state: string; badge: string; phase: string; since: string; reason: string; pool: string; detailsVisible: boolean; details: string }
const row = (name: string): Promise<RowView | null> => page.evaluate<RowView | null>(`(() => {
  const r = document.querySelector('tr[data-node=${JSON.stringify(name)}]');
  if (!r) return null;
  const d = document.querySelector('tr[data-details-for=${JSON.stringify(name)}]');
  return { bucket: r.dataset.bucket, state: r.dataset.state, badge: r.querySelector('.badge').textContent, phase: r.querySelector('.phase').textContent,
    since: r.querySelector('.since').textContent, reason: r.querySelector('.reason').textContent, pool: r.querySelector('.pool').textContent,
    detailsVisible: !!d && !d.hidden && d.getBoundingClientRect().height > 0, details: d ? d.textContent : '' };
})()`);

/** Waits until the node's row satisfies a JavaScript condition on `r` (the row element). */
const waitRow = (name: string, condition: string, what: string): Promise<unknown> =>
  page.waitFor(`(() => { const r = document.querySelector('tr[data-node=${JSON.stringify(name)}]'); return !!r && (${condition}); })()`, `${name}: ${what}`);

const poolCount = (pool: string, bucket: string): Promise<number> =>
  page.evaluate<number>(`Number(document.querySelector('tr[data-pool=${JSON.stringify(pool)}] .c-${bucket}')?.dataset.count ?? 0)`);

async function applyWorkerConfig(name: string): Promise<string> {
  const r = await runCliAsync([...conn, 'apply', '-f', '-'], { input: stringify(mcDoc(name, 'worker', { config: ign('3.4.0', { storage: { files: [fileEntry(`/etc/${name}`, name)] } }) })) });
  assert.equal(r.status, 0, r.stderr);
  const pool = JSON.parse((await runCliAsync([...conn, 'get', 'pool', 'worker', '-o', 'json'])).stdout);
  return pool.status.configuration.name;
}

const WORKERS = ['worker-a1', 'worker-a2', 'worker-a3', 'worker-b1', 'worker-b2', 'worker-b3', 'worker-c1', 'worker-c2', 'worker-c3'];
const MASTERS = ['master-0', 'master-1', 'master-2'];

before(async () => {
  if (skip) return;
  server = await startTestServer();
  conn = ['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null'];
  const applied = await runCliAsync([...conn, 'apply', '-f', '-'], { input: poolYaml('worker', '  maxUnavailable: 2\n') });
  assert.equal(applied.status, 0, applied.stderr);
  for (const [i, name] of MASTERS.entries()) await addAgent(name, 'master', `zone-${'abc'[i]}`);
  for (const name of WORKERS) await addAgent(name, 'worker', `zone-${name.at(-2)}`);
  dashboard = await startDashboard();
  browser = await launchChromium({ width: 1280, height: 760 });
  page = browser.page;
}, { timeout: 60_000 });

after(async () => {
  for (const d of dashboards) d.child.kill('SIGINT');
  await browser?.close();
  for (const a of agents.values()) a.close();
  await server?.close();
});

test('the page shows every pool and node, then follows a rollout live: Working to Done, a degraded node and its reason one click away', { skip, timeout: 60_000 }, async () => {
  assert.match(dashboard.out.stdout, /^Dashboard for 127\.0\.0\.1:\d+ at http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{48}\n\(open it in a browser on this machine; Ctrl-C to stop\)\n$/);
  await page.navigate(dashboard.url);
  await page.waitFor(`document.querySelectorAll('#nodes tr.node').length === ${WORKERS.length + MASTERS.length}`, 'every node listed');
  await page.waitFor(`document.getElementById('connection').dataset.state === 'live'`, 'the live banner');
  assert.equal(await page.evaluate('document.getElementById("control-plane").textContent'), server.address);
  assert.deepEqual(await page.evaluate('[...document.querySelectorAll("#pools tr.pool")].map((r) => r.dataset.pool)'), ['master', 'worker']);
  assert.equal(await poolCount('worker', 'updated'), WORKERS.length);
  assert.equal(await page.evaluate(`document.querySelector('tr[data-pool="worker"] .updated-count').textContent`), `${WORKERS.length}/${WORKERS.length}`);
  const before = (await row('worker-b2'))!;
  assert.equal(before.pool, 'worker');
  assert.equal(before.state, 'Done');
  assert.match(before.badge, /^✓ Done$/);

  // A new worker config: the control plane assigns it to two workers at a time (maxUnavailable 2).
  const target = await applyWorkerConfig('60-dashboard-one');
  const assigned = () => WORKERS.filter((n) => agents.get(n)!.lastAssignment?.renderedConfig === target);
  await agents.get(WORKERS[0]!)!.waitFor(() => assigned().length === 2);
  const [first, second] = assigned() as [string, string];
  await waitRow(first, `r.dataset.bucket === 'updating' && r.querySelector('.phase').textContent === 'assigned, not started'`, 'assigned, not started');
  await page.waitFor(`Number(document.querySelector('tr[data-pool="worker"] .c-waiting')?.dataset.count) === ${WORKERS.length - 2}`, 'the rest waiting in the bar');
  assert.equal(await poolCount('worker', 'updating'), 2);
  assert.equal(await poolCount('worker', 'updated'), 0);
  assert.equal(await poolCount('master', 'updated'), MASTERS.length, 'the master pool is untouched');
  assert.match((await row(first))!.badge, /^↻ Assigned$/);
  const waiting = WORKERS.find((n) => n !== first && n !== second)!;
  await waitRow(waiting, `r.dataset.bucket === 'waiting'`, 'waiting for its turn');
  assert.match((await row(waiting))!.badge, /^… Waiting$/);
  assert.equal((await row(waiting))!.state, 'Done', 'still Done on its old config');

  // Working: the row says so, with its phase, and the time in phase ticks without any event.
  const a = agents.get(first)!;
  a.report({ desiredConfig: target, state: 'Working', phase: 'apply' });
  await waitRow(first, `r.dataset.state === 'Working' && r.querySelector('.phase').textContent === 'apply'`, 'Working, apply');
  const working = (await row(first))!;
  assert.match(working.badge, /^↻ Working$/);
  assert.match(working.since, /^\d+s$/, 'seen changing live: an exact time in phase');
  await page.waitFor(`document.querySelector('tr[data-node=${JSON.stringify(first)}] .since').textContent !== ${JSON.stringify(working.since)}`, 'the time in phase ticking');
  // The rows of nodes at work come before the updated ones.
  const order = await page.evaluate<string[]>('[...document.querySelectorAll("#nodes tr.node")].map((r) => r.dataset.bucket)');
  assert.deepEqual(order, [...order].sort((x, y) => ['degraded', 'disconnected', 'updating', 'waiting', 'updated'].indexOf(x) - ['degraded', 'disconnected', 'updating', 'waiting', 'updated'].indexOf(y)));

  a.report({ desiredConfig: target, state: 'Working', phase: 'reboot' });
  await waitRow(first, `r.querySelector('.phase').textContent === 'reboot'`, 'reboot');
  a.report({ currentConfig: target, desiredConfig: target, state: 'Done', phase: 'done' });
  await waitRow(first, `r.dataset.state === 'Done' && r.dataset.bucket === 'updated'`, 'Done and updated');
  await page.waitFor(`Number(document.querySelector('tr[data-pool="worker"] .c-updated')?.dataset.count) === 1`, 'one updated in the bar');

  // Degraded: it stands out (its own colour, an icon and a word), its pool says so, and the
  // full reason is one click away.
  const reason = 'apply: file /etc/60-dashboard-one: EROFS: read-only file system, open \'/etc/.60-dashboard-one.mcplane-tmp\' (the root file system is mounted read-only: remount it read-write or check the disk, then mcctl node reapply ' + second + ')';
  agents.get(second)!.report({ desiredConfig: target, state: 'Working', phase: 'apply' });
  agents.get(second)!.report({ desiredConfig: target, state: 'Degraded', phase: 'apply', reason });
  await waitRow(second, `r.dataset.bucket === 'degraded'`, 'degraded');
  const degraded = (await row(second))!;
  assert.match(degraded.badge, /^⚠ Degraded$/);
  assert.equal(degraded.reason, reason);
  assert.equal(degraded.detailsVisible, false, 'details are closed until clicked');
  const style = await page.evaluate<{ bg: string; badge: string }>(`(() => {
    const r = document.querySelector('tr[data-node=${JSON.stringify(second)}]');
    return { bg: getComputedStyle(r).backgroundColor, badge: getComputedStyle(r.querySelector('.badge')).backgroundColor };
  })()`);
  assert.notEqual(style.bg, 'rgba(0, 0, 0, 0)', 'a degraded row has its own background');
  assert.equal(style.badge, 'rgb(198, 40, 40)');
  assert.equal(await page.evaluate('document.querySelector("#nodes tr.node").dataset.node'), second, 'a degraded node is listed first');
  await page.waitFor(`document.querySelector('tr[data-pool="worker"] .alerts').textContent.includes('NodeDegraded')`, 'the pool\'s NodeDegraded condition');
  assert.equal(await poolCount('worker', 'degraded'), 1);

  await page.click(`tr[data-node=${JSON.stringify(second)}] td.reason`);
  await waitRow(second, `!document.querySelector('tr[data-details-for=${JSON.stringify(second)}]').hidden`, 'details open after a click');
  const opened = (await row(second))!;
  assert.equal(opened.detailsVisible, true);
  assert.equal(await page.evaluate(`document.querySelector('tr[data-details-for=${JSON.stringify(second)}] .full-reason').textContent`), reason);
  assert.match(opened.details, new RegExp(`Desired config${target}`));

  // A slot is free again (one done; the degraded one still counts as unavailable): the next worker starts.
  await agents.get(WORKERS[0]!)!.waitFor(() => assigned().length === 3);
  const third = assigned().find((n) => n !== first && n !== second)!;
  agents.get(third)!.report({ desiredConfig: target, state: 'Working', phase: 'apply' });
  await waitRow(third, `r.dataset.state === 'Working'`, 'the third worker Working');

  const shot = join(TMP, 'dashboard.png');
  await page.screenshot(shot);
  assert.ok(statSync(shot).size > 10_000, 'a screenshot of the page');
  if (process.env.MCPLANE_DASHBOARD_SCREENSHOT) await page.screenshot(resolve(REPO_ROOT, process.env.MCPLANE_DASHBOARD_SCREENSHOT));
  assert.deepEqual(page.console.filter((l) => l.startsWith('exception')), []);
});

test('strings from the server are shown as text, never run as markup', { skip, timeout: 30_000 }, async () => {
  const payload = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script><b>bold</b>';
  const name = WORKERS.at(-1)!;
  agents.get(name)!.report({ state: 'Degraded', phase: 'validate', reason: payload });
  await waitRow(name, `r.dataset.bucket === 'degraded'`, 'degraded with markup in its reason');
  await page.click(`tr[data-node=${JSON.stringify(name)}]`);
  await waitRow(name, `!document.querySelector('tr[data-details-for=${JSON.stringify(name)}]').hidden`, 'details open');
  const seen = await page.evaluate<{ cell: string; full: string; imgs: number; scripts: number; bold: number; xss: unknown }>(`(() => ({
    cell: document.querySelector('tr[data-node=${JSON.stringify(name)}] .reason').textContent,
    full: document.querySelector('tr[data-details-for=${JSON.stringify(name)}] .full-reason').textContent,
    imgs: document.querySelectorAll('main img').length,
    scripts: document.querySelectorAll('main script').length,
    bold: document.querySelectorAll('main b').length,
    xss: typeof window.__xss,
  }))()`);
  assert.deepEqual(seen, { cell: payload, full: payload, imgs: 0, scripts: 0, bold: 0, xss: 'undefined' });
});

/** A raw HTTP request, so the Host header can be chosen (fetch forbids setting it). */
function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolveGet, reject) => {
    const req = request(url, { headers }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolveGet({ status: res.statusCode!, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('requests without the URL\'s token, with a wrong one, or for a foreign Host name get 403', { skip, timeout: 30_000 }, async () => {
  const u = new URL(dashboard.url);
  const base = `${u.protocol}//${u.host}`;
  const token = u.searchParams.get('token')!;
  for (const path of ['/', '/dashboard.js', '/dashboard.css', '/events', '/nothing-here']) {
    const none = await get(`${base}${path}`);
    assert.equal(none.status, 403, `${path} without a token`);
    assert.match(none.body, /forbidden: open the URL `mcctl dashboard` printed/);
    assert.equal((await get(`${base}${path}?token=${token.replace(/.$/, (c) => (c === '0' ? '1' : '0'))}`)).status, 403, `${path} with a wrong token`);
    assert.equal((await get(`${base}${path}?token=${token.slice(0, 10)}`)).status, 403, `${path} with a prefix of the token`);
  }
  const rebound = await get(dashboard.url, { Host: `attacker.example:${u.port}` });
  assert.equal(rebound.status, 403);
  assert.match(rebound.body, /answers only to http:\/\/127\.0\.0\.1/);

  const ok = await get(dashboard.url);
  assert.equal(ok.status, 200);
  assert.match(String(ok.headers['content-security-policy']), /script-src 'self'/);
  assert.equal(ok.headers['referrer-policy'], 'no-referrer');
  assert.match(ok.body, new RegExp(`<script defer src="/dashboard.js\\?token=${token}"></script>`));
  assert.equal((await get(`${base}/dashboard.js?token=${token}`)).status, 200);

  // The browser got in with the token, and a page opened without it shows nothing.
  await page.navigate(`${base}/`);
  assert.match(await page.evaluate<string>('document.body.textContent'), /forbidden/);
  await page.navigate(dashboard.url);
  await page.waitFor(`document.getElementById('connection').dataset.state === 'live'`, 'live again with the token');
});

// Five mcctl start-ups: side by side, with room for a loaded machine (each is seconds through tsx).
test('--address other than 127.0.0.1 and a bad --port are refused before anything connects or listens', { skip: false, timeout: scaled(120_000) }, async () => {
  const addresses = ['0.0.0.0', '192.168.1.10', '::', 'localhost'];
  const [port, ...refused] = await Promise.all([
    runCliAsync(['--config', '/dev/null', 'dashboard', '--port', '70000']),
    ...addresses.map((address) => runCliAsync(['--config', '/dev/null', 'dashboard', '--address', address])),
  ]);
  refused.forEach((r, i) => {
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`^error: mcctl dashboard: --address ${addresses[i]}: the dashboard listens on 127\\.0\\.0\\.1 only, .*ssh -L`));
    assert.equal(r.stdout, '');
  });
  assert.equal(port.status, 1);
  assert.match(port.stderr, /--port 70000: must be a port number from 0 to 65535/);
});

test('an unreachable control plane at start is an error, as for every other command', { skip: false, timeout: 90_000 }, async () => {
  const pkiDir = server?.pki.dir ?? (await import('../helpers/test-pki.ts').then((m) => m.testPki())).dir;
  const r = await runCliAsync(['--server', '127.0.0.1:1', '--pki-dir', pkiDir, '--config', '/dev/null', 'dashboard']);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /^error: cannot watch: no connection to 127\.0\.0\.1:1 over TLS .*connection refused/);
  assert.doesNotMatch(r.stdout, /http:/, 'no URL for a dashboard that cannot show anything');
});

test('the esbuild bundle (what npm pack and the RPM ship) serves the same working page', { skip, timeout: scaled(120_000) }, async () => {
  const bundle = bundlePath('mcctl');
  assert.ok(existsSync(join(REPO_ROOT, bundle)));
  const bundled = await startDashboard([bundle]);
  await page.navigate(bundled.url);
  await page.waitFor(`document.getElementById('connection').dataset.state === 'live'`, 'the bundle\'s page live');
  await page.waitFor(`document.querySelectorAll('#nodes tr.node').length === ${WORKERS.length + MASTERS.length}`, 'every node from the bundle\'s page');
  assert.equal(await poolCount('master', 'updated'), MASTERS.length);
  assert.deepEqual(page.console.filter((l) => l.startsWith('exception')), []);
  bundled.child.kill('SIGINT');
  assert.equal(await bundled.exited, 0, bundled.out.stderr);
});

test('when the control plane goes away the page says so, keeps the last state, and recovers when it is back', { skip, timeout: 60_000 }, async () => {
  await page.navigate(dashboard.url);
  await page.waitFor(`document.getElementById('connection').dataset.state === 'live'`, 'live');
  const { dataDir, address } = server;
  for (const a of agents.values()) a.close();
  await server.close();
  await page.waitFor(`document.getElementById('connection').dataset.state === 'reconnecting'`, 'the unreachable banner');
  const banner = await page.evaluate<string>(`document.getElementById('connection').textContent`);
  assert.match(banner, /^Control plane unreachable: lost the watch on 127\.0\.0\.1:\d+ \(.+\); reconnecting in \d+\.\ds \(attempt \d+\) \(showing the last known state\)$/);
  assert.equal(await page.evaluate('document.querySelectorAll("#nodes tr.node").length'), WORKERS.length + MASTERS.length, 'the last known state stays on the page');
  assert.match(dashboard.out.stderr, /mcctl: lost the watch on/);

  server = await startTestServer({ dataDir, listen: address });
  await page.waitFor(`document.getElementById('connection').dataset.state === 'live'`, 'live again after the control plane is back', 30_000);
  // The agents are gone: every node is now shown disconnected.
  await waitRow(MASTERS[0]!, `r.dataset.bucket === 'disconnected'`, 'disconnected after the restart');
  assert.match((await row(MASTERS[0]!))!.badge, /^⌀ Disconnected$/);
  assert.equal(dashboard.child.exitCode, null, 'the dashboard keeps running');
  dashboard.child.kill('SIGINT');
  assert.equal(await dashboard.exited, 0, dashboard.out.stderr);
  // And the page knows when mcctl dashboard itself is gone.
  await page.waitFor(`document.getElementById('connection').dataset.state === 'lost'`, 'the lost-dashboard banner');
  assert.match(await page.evaluate<string>(`document.getElementById('connection').textContent`), /^Lost (the connection to )?mcctl dashboard/);
});
