// A real Prometheus (Debian's, /usr/bin/prometheus) scrapes a real mcplane-server (mTLS gRPC,
// --metrics-listen) and a real mcplane-agent on a sandboxed host (its own systemd user manager
// over D-Bus, rpm-ostree and reboot stand-ins) every second, with the shipped alert rules
// loaded. After a rollout, its HTTP API answers MCO's pool counts equal to what
// `mcctl get pools -o json` shows, and the agent's mcd_state.

import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { stringify } from 'yaml';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
// Prometheus cannot be told to take port 0: freePort binds one, releases it and hands it over.
import { freePort } from '../../sandbox/etcd-cluster.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { untilPoolUpdated } from '../helpers/converge.ts';
import { mcYaml } from '../helpers/manifests.ts';
import { REPO_ROOT, runCliAsync } from '../helpers/run-cli.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const PROMETHEUS = '/usr/bin/prometheus';
const skip = (spawnSync(PROMETHEUS, ['--version']).status !== 0 && 'Debian\'s prometheus is not installed (apt-get install prometheus)')
  || (!canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace');

let server: TestServer;
let c: Clients;
let host: SandboxHost;
let prometheus: ChildProcess | undefined;
let promLog = '';
let dir = '';
let api = '';

interface Vector { metric: Record<string, string>; value: [number, string] }

async function query(promql: string): Promise<Vector[]> {
  const res = await fetch(`${api}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = await res.json() as { status: string; data: { resultType: string; result: Vector[] }; error?: string };
  assert.equal(body.status, 'success', `${promql}: ${body.error}`);
  return body.data.result;
}

const apply = (text: string) => call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'mc.yaml', text }], dryRun: false }, 'apply');
const motd = (text: string) => mcYaml('50-motd', 'worker', `  config:\n    ignition: {version: 3.4.0}\n    storage: {files: [{path: /etc/motd, contents: {source: "data:,${text}"}}]}\n`);

before(async () => {
  if (skip) return;
  server = await startTestServer({ metrics: { listen: '127.0.0.1:0' } });
  c = server.admin();
  await apply(motd('one'));
  // A fixed port, as on a real host: the agent is restarted by each reboot and must come back
  // where Prometheus scrapes it.
  const agentPort = await freePort();
  host = new SandboxHost({ name: 'scraped', server: server.address, pki: server.pki, config: { metrics: { listen: `127.0.0.1:${agentPort}` } } });
  await host.start();
  await untilPoolUpdated(c, [host], 'worker', 1);

  dir = mkdtempSync(join(tmpdir(), 'mcplane-prometheus-'));
  const port = await freePort();
  api = `http://127.0.0.1:${port}`;
  writeFileSync(join(dir, 'prometheus.yml'), stringify({
    global: { scrape_interval: '1s', evaluation_interval: '1s' },
    rule_files: [join(REPO_ROOT, 'packaging/prometheus/mcplane-alerts.yaml')],
    scrape_configs: [
      { job_name: 'mcplane-server', static_configs: [{ targets: [`127.0.0.1:${server.handle.metricsPort}`] }] },
      { job_name: 'mcplane-agent', static_configs: [{ targets: [`127.0.0.1:${agentPort}`] }] },
    ],
  }));
  prometheus = spawn(PROMETHEUS, [
    `--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn',
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  prometheus.stdout!.on('data', (d) => { promLog += d; });
  prometheus.stderr!.on('data', (d) => { promLog += d; });
  await eventually(async () => {
    if (prometheus!.exitCode !== null) throw new Error(`prometheus exited ${prometheus!.exitCode}: ${promLog}`);
    return (await fetch(`${api}/-/ready`).catch(() => undefined))?.status === 200;
  }, 30_000, 'prometheus ready');
});

after(async () => {
  if (skip) return;
  if (prometheus && prometheus.exitCode === null) {
    const exited = new Promise((r) => prometheus!.once('exit', r));
    prometheus.kill('SIGTERM');
    await exited;
  }
  await host?.stop();
  await server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('Prometheus scrapes the server and the agent; after a rollout its API answers the pool counts mcctl shows', { skip }, async () => {
  await eventually(async () => (await query('up')).filter((v) => v.value[1] === '1').length === 2, 20_000, 'both targets up');

  // A rollout while Prometheus watches: the new file needs a reboot (no disruption policy).
  await apply(motd('two'));
  await untilPoolUpdated(c, [host], 'worker', 1);
  const got = await runCliAsync(['get', 'pools', '-o', 'json', '--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null']);
  assert.equal(got.status, 0, got.stderr);
  const pools = JSON.parse(got.stdout) as { items: { metadata: { name: string }; status: Record<string, number> }[] };
  const worker = pools.items.find((p) => p.metadata.name === 'worker')!;
  assert.equal(worker.status.machineCount, 1);
  assert.equal(worker.status.updatedMachineCount, 1);

  const value = async (promql: string): Promise<number | undefined> => {
    const r = await query(promql);
    assert.ok(r.length <= 1, `${promql}: ${JSON.stringify(r)}`);
    return r[0] ? Number(r[0].value[1]) : undefined;
  };
  // Scraped every second: wait until the samples after the rollout are in.
  let seen = '';
  await eventually(async () => {
    const connected = await value('max by (pool) (mcplane_agents_connected{pool="worker"})');
    const reboots = await value('max(mcplane_update_phase_duration_seconds_count{phase="reboot"})');
    // The agent's own samples too: it was restarted by its reboot and is scraped again from then.
    const agentState = await query('mcd_state{job="mcplane-agent"}');
    seen = `connected ${connected}, reboots timed ${reboots}, agent series ${agentState.length}`;
    return connected === 1 && reboots === 2 && agentState.length === 1 && agentState[0]!.metric.state === 'Done';
  }, 20_000, "the rollout scraped").catch(async (err: Error) => { throw new Error(`${err.message}: ${seen}\n${(await (await fetch(`http://127.0.0.1:${server.handle.metricsPort}/metrics`)).text()).split("\n").filter((l) => l.includes("phase")).join("\n")}\n${host.logs.slice(-20).join("\n")}`); });
  // The pool counts mcctl showed: Prometheus' latest sample may predate the pool status that
  // mcctl read (scraped every second), so wait for a scrape after it, then they must agree.
  const mismatches = async (): Promise<string[]> => {
    const out: string[] = [];
    for (const pool of pools.items) {
      const name = pool.metadata.name;
      for (const [metric, field] of [['mco_machine_count', 'machineCount'], ['mco_updated_machine_count', 'updatedMachineCount'],
        ['mco_degraded_machine_count', 'degradedMachineCount'], ['mco_unavailable_machine_count', 'unavailableMachineCount'],
        ['mcplane_ready_machine_count', 'readyMachineCount']] as const) {
        const scraped = await value(`max by (pool) (${metric}{pool="${name}"})`);
        if (scraped !== (pool.status[field] ?? 0)) out.push(`${metric}{pool="${name}"} = ${scraped}, mcctl's status.${field} = ${pool.status[field] ?? 0}`);
      }
    }
    return out;
  };
  await eventually(async () => (await mismatches()).length === 0, 10_000, 'the scraped pool counts').catch(async (err: Error) => {
    throw new Error(`${err.message}: ${(await mismatches()).join('; ')}`);
  });
  assert.equal(await value('mcplane_pool_rollout_progress_ratio{pool="worker"}'), 1);
  assert.equal(await value('count(mcplane_pool_rollout_eta_seconds)'), undefined, 'no ETA series once the rollout is over');
  assert.equal(await value('sum(mcplane_leader)'), 1);

  // The agent, scraped on its own: Done on the new config, and the reboot it went through timed.
  const state = await query('mcd_state{job="mcplane-agent"}');
  assert.equal(state.length, 1);
  assert.equal(state[0]!.metric.state, 'Done');
  assert.equal(await value('mcplane_agent_update_phase_duration_seconds_count{phase="reboot"}'), 1);
  assert.ok((await value('mcplane_agent_process_resident_memory_bytes'))! > 0);
  // Certificate expiry from both: the CA (10 years) from the server, the node's (90 days) from its agent.
  assert.ok((await value('min(mcplane_certificate_expiry_seconds{kind="ca"})'))! > 3600 * 86400);
  assert.ok((await value('min(mcplane_certificate_expiry_seconds{kind="node",job="mcplane-agent"})'))! > 80 * 86400);

  // The shipped rules are loaded and healthy, and nothing fires on a healthy fleet.
  const rules = await (await fetch(`${api}/api/v1/rules`)).json() as { data: { groups: { rules: { name: string; health: string }[] }[] } };
  const loaded = rules.data.groups.flatMap((g) => g.rules);
  assert.equal(loaded.length, 9);
  assert.ok(loaded.every((r) => r.health !== 'err'), JSON.stringify(loaded));
  // The agent was away for its reboot: an alert may stand pending until the rules are next
  // evaluated on samples from after it came back (every second here). None may fire, and none
  // may stay.
  let alerts: { state: string }[] = [];
  await eventually(async () => {
    alerts = ((await (await fetch(`${api}/api/v1/alerts`)).json()) as { data: { alerts: { state: string }[] } }).data.alerts;
    assert.ok(alerts.every((a) => a.state !== 'firing'), JSON.stringify(alerts));
    return alerts.length === 0;
  }, 15_000, 'no alert pending or firing on the healthy fleet').catch((err: Error) => { throw new Error(`${err.message}: ${JSON.stringify(alerts)}`); });
});
