// mcctl dashboard with 500 nodes in headless Chromium: one line per node, the pools in view
// without scrolling, the nodes at work listed first, and the filters narrowing 500 rows to the
// few that matter. 500 simulated agents (the real AgentService protocol over mTLS) on a real
// server; the rollout moves 50 of them.

import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { after, before, test } from 'node:test';
import { chromiumMissing, launchChromium, type Browser } from '../helpers/headless-chromium.ts';
import { programArgs, REPO_ROOT } from '../helpers/run-cli.ts';
import { everyAgent, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';
import { scaled } from '../helpers/time-scale.ts';

const skip = chromiumMissing;
const NODES = 500;
let server: TestServer;
let browser: Browser;
let dashboard: ChildProcess;
let url: string;
const agents: SimulatedAgent[] = [];

before(async () => {
  if (skip) return;
  server = await startTestServer();
  for (let i = 0; i < NODES; i++) {
    const name = `worker-${String(i).padStart(3, '0')}`;
    agents.push(new SimulatedAgent({ address: server.address, tls: await server.pki.node(name), name, autoDone: true, labels: { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': `z${i % 3}` } }));
  }
  // 500 TLS handshakes at once take as long as the machine's load makes them (a fixed 40 s ran
  // out at load 6-9 on two cores): connect()'s own wait may give up while the stream goes on, so
  // the registrations are waited for while they keep coming, and a stall fails naming who is missing.
  for (const a of agents) a.connect().catch(() => undefined);
  await everyAgent(agents, (a) => a.pool !== undefined, 'registered');
  await everyAgent(agents, (a) => a.status.state === 'Done' && !!a.status.currentConfig, 'Done on the rendered config');
  // mcctl as it ships (the suite's bundle; from source when the run has none): through tsx its
  // start alone costs about 2 s of CPU, and the page it serves is the same (dashboard-browser.test.ts
  // runs both).
  dashboard = spawn(process.execPath, [...programArgs('mcctl'), '--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', 'dashboard'], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  dashboard.stdout!.on('data', (d) => { out += d; });
  const deadline = Date.now() + scaled(20_000);
  while (!/token=/.test(out) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
  url = /(http:\/\/\S+)/.exec(out)![1]!;
  // A laptop screen.
  browser = await launchChromium({ width: 1366, height: 768 });
}, { timeout: scaled(240_000) });

after(async () => {
  dashboard?.kill('SIGINT');
  await browser?.close();
  for (const a of agents) a.close();
  await server?.close();
});

test('500 nodes: one line each, pools in view, nodes at work first, filters narrow the list', { skip, timeout: scaled(60_000) }, async () => {
  const page = browser.page;
  await page.navigate(url);
  await page.waitFor(`document.querySelectorAll('#nodes tr.node').length === ${NODES}`, 'every node listed', 30_000);
  await page.waitFor(`document.querySelector('tr[data-pool="worker"] .c-updated')?.dataset.count === '${NODES}'`, 'all updated in the bar');

  const layout = await page.evaluate<{ poolsBottom: number; viewport: number; tallest: number; nodeTableWidth: number; pageWidth: number }>(`(() => {
    const rows = [...document.querySelectorAll('#nodes tr.node')];
    return {
      poolsBottom: document.getElementById('pools').getBoundingClientRect().bottom,
      viewport: innerHeight,
      tallest: Math.max(...rows.map((r) => r.getBoundingClientRect().height)),
      nodeTableWidth: document.getElementById('nodes').getBoundingClientRect().width,
      pageWidth: document.documentElement.clientWidth,
    };
  })()`);
  assert.ok(layout.poolsBottom < layout.viewport / 2, `the pools fit in the top half of the screen: ${JSON.stringify(layout)}`);
  assert.ok(layout.tallest <= 24, `one line per node: ${JSON.stringify(layout)}`);
  assert.ok(layout.nodeTableWidth <= layout.pageWidth, `no horizontal scrolling: ${JSON.stringify(layout)}`);

  // 50 nodes start working, one degrades: they come first, and the filters find them.
  for (const a of agents.slice(100, 150)) a.report({ state: 'Working', phase: 'apply', desiredConfig: 'rendered-worker-next' });
  agents[400]!.report({ state: 'Degraded', phase: 'validate', reason: 'validate: kernelArguments: hugepages=32 is not on the booted kernel command line' });
  await page.waitFor(`document.querySelectorAll('#nodes tr.node[data-state="Working"]').length === 50`, '50 Working');
  await page.waitFor(`document.querySelector('#nodes tr.node').dataset.node === 'worker-400'`, 'the degraded node first');
  const firstRows = await page.evaluate<string[]>(`[...document.querySelectorAll('#nodes tr.node')].slice(0, 51).map((r) => r.dataset.bucket)`);
  assert.deepEqual(firstRows, ['degraded', ...Array<string>(50).fill('updating')]);
  assert.equal(await page.evaluate(`document.querySelector('tr[data-pool="worker"] .c-updating').dataset.count`), '50');

  await page.click('#not-updated');
  await page.waitFor(`document.getElementById('node-count').textContent === '(51 of ${NODES} shown)'`, 'only the nodes not updated');
  assert.equal(await page.evaluate(`[...document.querySelectorAll('#nodes tr.node')].filter((r) => !r.hidden).length`), 51);
  await page.click('#not-updated');

  await page.click('#filter');
  await page.send('Input.insertText', { text: 'hugepages' });
  await page.waitFor(`document.getElementById('node-count').textContent === '(1 of ${NODES} shown)'`, 'a reason found by the filter box');
  assert.deepEqual(await page.evaluate(`[...document.querySelectorAll('#nodes tr.node')].filter((r) => !r.hidden).map((r) => r.dataset.node)`), ['worker-400']);
  assert.deepEqual(page.console.filter((l) => l.startsWith('exception')), []);
});
