// mcctl wait and mcctl rollout status against a real server over TLS, with simulated agents
// (the real AgentService protocol) that the test moves through a rollout step by step.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import { stringify } from 'yaml';
import { fileEntry, ign, mcDoc } from '../helpers/manifests.ts';
import { REPO_ROOT, runCliAsync } from '../helpers/run-cli.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

const { server, agents, conn } = serverFixture({}, async () => {
  for (const name of ['w1', 'w2']) {
    const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name), name, labels: { 'node-role.kubernetes.io/worker': '' } });
    await agent.connect();
    agents.push(agent);
  }
  // Let both reach the pool's first config.
  for (const a of agents) {
    await a.waitFor(() => a.lastAssignment !== undefined);
    a.report({ currentConfig: a.lastAssignment!.renderedConfig, desiredConfig: a.lastAssignment!.renderedConfig, state: 'Done', phase: 'done' });
  }
});

const mcctl = (...args: string[]) => runCliAsync([...conn, ...args]);

async function applyWorkerFile(name: string, text: string): Promise<string> {
  const r = await runCliAsync([...conn, 'apply', '-f', '-'], { input: stringify(mcDoc(name, 'worker', { config: ign('3.4.0', { storage: { files: [fileEntry(`/etc/${name}`, text)] } }) })) });
  assert.equal(r.status, 0, r.stderr);
  const pool = JSON.parse((await mcctl('get', 'pool', 'worker', '-o', 'json')).stdout);
  return pool.status.configuration.name;
}

/** Starts an mcctl process and collects its output as it comes. */
function startCli(args: string[], pty = false) {
  const argv = [process.execPath, '--import', 'tsx', 'src/cli/main.ts', ...conn, ...args];
  // A pseudo-terminal from util-linux's script(1): stdout is a TTY there.
  const child = pty
    ? spawn('script', ['-qec', argv.map((a) => `'${a}'`).join(' '), '/dev/null'], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(argv[0]!, argv.slice(1), { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d) => { out.stdout += d; });
  child.stderr.on('data', (d) => { out.stderr += d; });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const until = async (re: RegExp, timeoutMs = 15_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!re.test(out.stdout)) {
      if (Date.now() > deadline) throw new Error(`no ${re} within ${timeoutMs} ms:\n${out.stdout}\n${out.stderr}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  };
  return { child, out, exited, until };
}

/**
 * Reports each phase and waits until mcctl showed it: the server stores a node's reports in
 * batches that keep only the latest, so phases sent a fixed pause apart can merge on a loaded
 * machine and the display would never show the first.
 */
async function moveThrough(agent: SimulatedAgent, target: string, phases: string[], cli: { until: (re: RegExp) => Promise<void> }): Promise<void> {
  await agent.waitFor(() => agent.lastAssignment?.renderedConfig === target);
  for (const phase of phases) {
    agent.report({ desiredConfig: target, state: 'Working', phase });
    await cli.until(new RegExp(`${agent.options.name}: ${phase}`));
  }
}

test('wait --for=condition=Updated shows progress, then exits 0 when the pool is Updated', async () => {
  const target = await applyWorkerFile('60-wait', 'one');
  const cli = startCli(['wait', 'pool/worker', '--for=condition=Updated', '--timeout=30s']);
  await cli.until(/0\/2 nodes updated/);
  const [w1, w2] = agents as [SimulatedAgent, SimulatedAgent];
  await moveThrough(w1, target, ['apply', 'reboot'], cli);
  w1.report({ currentConfig: target, state: 'Done', phase: 'done' });
  // The count comes from the pool's status, which the leader writes in passes that may come up to
  // a second apart: w2 finishing within one would take the count from 0/2 to 2/2.
  await cli.until(/1\/2 nodes updated/);
  await moveThrough(w2, target, ['apply'], cli);
  w2.report({ currentConfig: target, state: 'Done', phase: 'done' });
  assert.equal(await cli.exited, 0, cli.out.stderr);
  const lines = cli.out.stdout.trimEnd().split('\n');
  assert.ok(!cli.out.stdout.includes('\x1b['), 'no terminal control codes when stdout is not a terminal');
  assert.ok(lines.includes('  w1: apply') && lines.includes('  w1: reboot') && lines.includes('  w2: apply'), cli.out.stdout);
  assert.ok(lines.some((l) => /^pool\/worker: 1\/2 nodes updated to rendered-worker-/.test(l)), cli.out.stdout);
  assert.equal(lines.at(-1), 'pool/worker condition met: Updated=True');
  // Plain lines: what changed, never the same line twice in a row.
  assert.ok(lines.every((l, i) => l !== lines[i - 1]), cli.out.stdout);
});

test('rollout status exits non-zero with the node and its reason when a node degrades', async () => {
  const target = await applyWorkerFile('61-degrade', 'two');
  const cli = startCli(['rollout', 'status', 'pool/worker']);
  await cli.until(/0\/2 nodes updated/);
  const w1 = agents[0]!;
  await moveThrough(w1, target, ['apply'], cli);
  w1.report({ state: 'Degraded', phase: 'apply', reason: 'apply: file /etc/61-degrade: EROFS: read-only file system' });
  assert.equal(await cli.exited, 1);
  assert.match(cli.out.stderr, /error: pool\/worker will not become Updated without help:\n {2}- node w1 is Degraded: apply: file \/etc\/61-degrade: EROFS: read-only file system/);
});

test('wait times out with the progress so far; a missing pool is an error', async () => {
  const started = Date.now();
  // w1 is still degraded: the pool is not Degraded=False, and a wait for that does not fail early.
  const r = await mcctl('wait', 'pool/worker', '--for=condition=Degraded=False', '--timeout', '1500ms');
  assert.equal(r.status, 1);
  assert.ok(Date.now() - started >= 1400);
  assert.match(r.stderr, /timed out after 1\.5s waiting for pool\/worker to be Degraded=False:\n {2}pool\/worker: 0\/2 nodes updated.*\n {2}w1: Degraded: apply: file/);
  const missing = await mcctl('wait', 'pool/nope', '--for=condition=Updated');
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /MachineConfigPool\/nope not found/);
  assert.match((await mcctl('wait', 'node/w1', '--for=condition=Updated')).stderr, /give the pool as pool\/NAME/);
  assert.match((await mcctl('wait', 'pool/worker', '--for=Updated')).stderr, /use --for=condition=NAME/);
});

test('on a terminal, rollout status redraws the display in place', async () => {
  agents[0]!.report({ state: 'Done', phase: 'done', reason: '' }); // no longer degraded
  const target = await applyWorkerFile('62-tty', 'three');
  const cli = startCli(['rollout', 'status', 'pool/worker', '--timeout', '30s'], true);
  await cli.until(/nodes updated to/);
  for (const [i, agent] of agents.entries()) {
    await moveThrough(agent, target, ['apply', 'reboot'], cli);
    agent.report({ currentConfig: target, state: 'Done', phase: 'done', reason: '' });
    if (i === 0) await cli.until(/1\/2 nodes updated/); // see the first test
  }
  assert.equal(await cli.exited, 0, cli.out.stdout + cli.out.stderr);
  // Cursor up to the start of the previous display ("ESC[nF"), then clear below ("ESC[J").
  assert.match(cli.out.stdout, /\x1b\[\dF\x1b\[Jpool\/worker: 1\/2 nodes updated/);
  assert.match(cli.out.stdout, /pool\/worker successfully rolled out: 2\/2 nodes on rendered-worker-/);
});

test('rollout status --timeout limits the whole wait, apart from --request-timeout, which limits each call', async () => {
  await applyWorkerFile('63-stays', 'four'); // no agent moves: the pool stays Updating
  const started = Date.now();
  const r = await mcctl('rollout', 'status', 'pool/worker', '--request-timeout', '500ms', '--timeout', '2s');
  const took = Date.now() - started;
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.ok(took >= 1900, `it gave up after ${took} ms, before its 2 s wait (a 500 ms call limit is not the wait's)`);
  assert.match(r.stderr, /timed out after 2s waiting for pool\/worker to be Updated=True:\n {2}pool\/worker: 0\/2 nodes updated/);
  assert.doesNotMatch(r.stderr, /Warning: --timeout/, 'on a wait, --timeout is its own flag, not the old name of --request-timeout');
});
