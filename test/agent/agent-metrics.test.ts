// The agent's /metrics from the real mcplane-agent process on a sandboxed host (real systemd user
// manager over D-Bus, rpm-ostree and reboot stand-ins): MCO's mcd_state, mcd_config_drift and
// mcd_reboots_failed_total, update phase durations (a reboot timed across the restart), memory.

import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseAgentConfig } from '../../src/agent/agent-config.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from '../helpers/converge.ts';
import { mcYaml } from '../helpers/manifests.ts';
import { sample, samples, scrape } from '../helpers/prometheus-text.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { sandboxFixture } from '../helpers/sandbox-fixture.ts';

const { skip, server, c, systemd, hosts, apply, target: poolTarget } = sandboxFixture({
  sharedSystemd: true,
  // A file with no disruption policy: MCO's default, a reboot.
  setUp: async () => { await apply(mcYaml('50-watched', 'worker', '  config:\n    ignition: {version: 3.4.0}\n    storage: {files: [{path: /etc/watched.conf, contents: {source: "data:,expected"}}]}\n')); },
});

async function metricsOf(host: SandboxHost) {
  let url: string | undefined;
  await eventually(() => (url = host.metricsUrl()) !== undefined, 10_000, `${host.options.name}'s metrics address in its log`);
  return scrape(url!);
}

test('the agent\'s config: metrics on 127.0.0.1:9624 by default, "" turns them off, other addresses need an explicit opt-in', () => {
  const base = { server: '127.0.0.1:7443', insecure: true, nodeName: 'n' };
  assert.deepEqual(parseAgentConfig(base).metrics, { listen: '127.0.0.1:9624', allowNonLoopback: false });
  assert.deepEqual(parseAgentConfig({ ...base, metrics: { listen: '' } }).metrics, { listen: '', allowNonLoopback: false });
  assert.throws(() => parseAgentConfig({ ...base, metrics: { listen: '0.0.0.0:9624' } }, 'agent.yaml'),
    /agent\.yaml: metrics\.listen: 0\.0\.0\.0:9624: \/metrics is plain HTTP without authentication and listens only on a loopback address .* unless metrics\.allowNonLoopback: true is also set/);
  assert.equal(parseAgentConfig({ ...base, metrics: { listen: '0.0.0.0:9624', allowNonLoopback: true } }).metrics.listen, '0.0.0.0:9624');
  assert.throws(() => parseAgentConfig({ ...base, metrics: { listen: 'nine' } }), /metrics\.listen: "nine" is not HOST:PORT/);
  assert.throws(() => parseAgentConfig({ ...base, metrics: { port: 1 } }), /metrics\.port: unknown field/);
  assert.throws(() => parseAgentConfig({ ...base, metrics: '127.0.0.1:1' }), /metrics: must be a mapping/);
});

test('an update with a reboot: every phase timed (the reboot across the restart), mcd_state Done; drift sets mcd_config_drift and Degraded', { skip }, async () => {
  const host = new SandboxHost({ name: 'metrics-a', server: server.address, pki: server.pki, systemd, driftIntervalSeconds: 1 });
  hosts.push(host);
  await host.start();
  const target = await poolTarget();
  const startedAt = Date.now() / 1000;
  await untilNode(c, [host], 'metrics-a', (n) => n.status!.currentConfig === target && n.status!.state === 'Done');
  assert.equal(host.reboots, 1);

  let m = await metricsOf(host);
  await eventually(async () => {
    m = await metricsOf(host);
    return sample(m, 'mcplane_agent_update_phase_duration_seconds_count', { phase: 'validate' }) === 1;
  }, 10_000, 'validate timed');
  // The agent after the reboot timed the reboot (from the request, kept in its state directory)
  // and what followed; the phases before it were timed by the process that rebooted.
  const rebootSeconds = sample(m, 'mcplane_agent_update_phase_duration_seconds_sum', { phase: 'reboot' });
  assert.equal(sample(m, 'mcplane_agent_update_phase_duration_seconds_count', { phase: 'reboot' }), 1);
  assert.ok(rebootSeconds! > 0 && rebootSeconds! < 60, `reboot took ${rebootSeconds} s`);
  const state = samples(m, 'mcd_state');
  assert.equal(state.length, 1, JSON.stringify(state));
  assert.deepEqual(state[0]!.labels, { state: 'Done', reason: '' });
  // Its own certificate's time left, labelled as the server labels it.
  const certificate = Date.parse(new X509Certificate(readFileSync((await server.pki.node('metrics-a')).cert)).validTo);
  const left = sample(m, 'mcplane_certificate_expiry_seconds', { kind: 'node', name: 'metrics-a' });
  assert.ok(left !== undefined && Math.abs(left - (certificate - Date.now()) / 1000) < 60, `${left} s left`);
  assert.ok(state[0]!.value >= startedAt - 1 && state[0]!.value <= Date.now() / 1000 + 1, `entered Done at ${state[0]!.value}`);
  assert.equal(sample(m, 'mcd_config_drift'), 0);
  assert.equal(sample(m, 'mcplane_agent_drifted_objects'), 0);
  assert.equal(sample(m, 'mcd_reboots_failed_total'), 0);
  assert.ok(sample(m, 'mcplane_agent_process_resident_memory_bytes')! > 10_000_000, 'its own memory');
  assert.ok(sample(m, 'mcplane_agent_nodejs_heap_size_used_bytes')! > 0);

  const before = Date.now() / 1000;
  writeFileSync(join(host.root, 'etc/watched.conf'), 'edited by hand');
  await eventually(async () => {
    m = await metricsOf(host);
    return sample(m, 'mcd_config_drift')! > 0;
  }, 10_000, 'drift in the metrics');
  assert.ok(sample(m, 'mcd_config_drift')! >= before - 1, 'the time drift was detected');
  assert.equal(sample(m, 'mcplane_agent_drifted_objects'), 1);
  const degraded = samples(m, 'mcd_state');
  assert.equal(degraded.length, 1, 'one state at a time');
  assert.equal(degraded[0]!.labels.state, 'Degraded');
  assert.match(degraded[0]!.labels.reason!, /^drift: .*\/etc\/watched\.conf/);
});

test('a reboot that fails counts in mcd_reboots_failed_total, and the node is Degraded in phase reboot', { skip }, async () => {
  const host = new SandboxHost({ name: 'metrics-b', server: server.address, pki: server.pki, systemd, config: { reboot: { method: 'command', command: ['/bin/false'] } } });
  hosts.push(host);
  await host.start();
  await untilNode(c, [host], 'metrics-b', (n) => n.status!.state === 'Degraded' && n.status!.phase === 'reboot');
  let m = await metricsOf(host);
  await eventually(async () => {
    m = await metricsOf(host);
    return sample(m, 'mcd_reboots_failed_total') === 1;
  }, 10_000, 'failed reboot counted');
  assert.equal(samples(m, 'mcd_state')[0]!.labels.state, 'Degraded');
  assert.match(samples(m, 'mcd_state')[0]!.labels.reason!, /reboot/);
  assert.equal(sample(m, 'mcplane_agent_update_phase_duration_seconds_count', { phase: 'apply' }), 1);
  // The phase that failed is timed too (it ended), under its own name.
  assert.equal(sample(m, 'mcplane_agent_update_phase_duration_seconds_count', { phase: 'reboot' }), 1);
});
