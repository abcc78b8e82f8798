// The shipped alert rules (packaging/prometheus/mcplane-alerts.yaml) with Debian's promtool:
// `promtool check rules` on the file as shipped, `promtool test rules` with series that prove
// each alert fires when it should and not otherwise, a runbook on every alert, and every metric
// the rules read exported by a real mcplane-server or agent (a renamed metric would otherwise
// leave an alert that can never fire).

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse, stringify } from 'yaml';
import { AgentMetrics } from '../../src/agent/agent-metrics.ts';
import { parsePrometheusText } from '../helpers/prometheus-text.ts';
import { REPO_ROOT } from '../helpers/run-cli.ts';
import { startTestServer } from '../helpers/test-server.ts';

const skip = spawnSync('promtool', ['--version']).status !== 0 && 'promtool is not installed (apt-get install prometheus)';
const RULES = join(REPO_ROOT, 'packaging/prometheus/mcplane-alerts.yaml');
const CASES = join(REPO_ROOT, 'test/packaging/mcplane-alerts.promtool.yaml');

interface Rule { alert: string; expr: string; for?: string; labels: Record<string, string>; annotations: Record<string, string> }
const rules = (): Rule[] => (parse(readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

test('promtool check rules passes on the shipped file', { skip }, () => {
  const r = spawnSync('promtool', ['check', 'rules', RULES], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /SUCCESS: 9 rules found/);
});

test('every alert the issue asks for is there, with a summary, a description and a runbook naming mcctl commands', () => {
  const byName = new Map(rules().map((r) => [r.alert, r]));
  assert.deepEqual([...byName.keys()].sort(), [
    'MCPlaneAgentConfigDrift', 'MCPlaneAgentsDisconnected', 'MCPlaneCertificateExpiringSoon', 'MCPlaneNoLeader', 'MCPlaneNodeConfigDrift',
    'MCPlaneNodeStuckInPhase', 'MCPlanePoolDegraded', 'MCPlaneRenderFailed',
  ]);
  for (const r of byName.values()) {
    assert.ok(r.annotations.summary && r.annotations.description, `${r.alert}: summary and description`);
    assert.match(r.annotations.runbook ?? '', /What it means[\s\S]*mcctl (describe|get)/, `${r.alert}: runbook says what it means and which mcctl commands to run`);
    assert.match(r.labels.severity ?? '', /^(warning|critical)$/, `${r.alert}: severity`);
  }
  // Minutes, not MCO's hour.
  assert.match(byName.get('MCPlaneNodeStuckInPhase')!.expr, /> 900$/);
  // Certificates: one name, a warning and a page (kubernetes-mixin's way), each with the
  // troubleshooting section to open.
  const certificates = rules().filter((r) => r.alert === 'MCPlaneCertificateExpiringSoon');
  assert.deepEqual(certificates.map((r) => r.labels.severity), ['warning', 'critical']);
  for (const r of certificates) assert.equal(r.annotations.runbook_url, 'docs/troubleshooting.md#certificate-expiring');
});

test('promtool test rules: each alert fires when it should and not otherwise', { skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcplane-promtool-'));
  try {
    // The rules as shipped, with only the summary among the annotations (see the cases' header).
    const doc = parse(readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] };
    for (const g of doc.groups) for (const r of g.rules) r.annotations = { summary: r.annotations.summary! };
    writeFileSync(join(dir, 'mcplane-alerts.yaml'), stringify(doc));
    copyFileSync(CASES, join(dir, 'cases.yaml'));
    const r = spawnSync('promtool', ['test', 'rules', join(dir, 'cases.yaml')], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /SUCCESS/);

    // Every alert has a case where it fires and one where it must not.
    const cases = parse(readFileSync(CASES, 'utf8')) as { tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[] };
    const checks = cases.tests.flatMap((t) => t.alert_rule_test);
    for (const { alert } of rules()) {
      assert.ok(checks.some((c) => c.alertname === alert && c.exp_alerts.length > 0), `${alert} has a case where it fires`);
      assert.ok(checks.some((c) => c.alertname === alert && c.exp_alerts.length === 0), `${alert} has a case where it does not`);
    }

    // And the cases can fail: an alert made to wait longer than its case allows is caught.
    const late = stringify(doc).replace("for: 5m", 'for: 10m');
    writeFileSync(join(dir, 'mcplane-alerts.yaml'), late);
    const failed = spawnSync('promtool', ['test', 'rules', join(dir, 'cases.yaml')], { encoding: 'utf8' });
    assert.notEqual(failed.status, 0);
    assert.match(failed.stdout + failed.stderr, /MCPlanePoolDegraded/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Metric names as /metrics declares them (# TYPE), whether or not they have series right now. */
function declared(text: string): Set<string> {
  parsePrometheusText(text); // well-formed
  return new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
}

test('every metric the rules read is one a real mcplane-server or agent exports', async () => {
  const server = await startTestServer({ metrics: { listen: '127.0.0.1:0' } });
  let exported: Set<string>;
  try {
    const text = await (await fetch(`http://127.0.0.1:${server.handle.metricsPort}/metrics`)).text();
    exported = declared(text);
  } finally {
    await server.close();
  }
  const stateDir = mkdtempSync(join(tmpdir(), 'mcplane-agent-metrics-'));
  try {
    const agent = new AgentMetrics(stateDir, () => 'boot');
    for (const name of declared(await agent.registry.metrics())) exported.add(name);
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
  for (const r of rules()) {
    const names = r.expr.match(/\b(mco|mcd|mcplane)_[a-z_]+\b/g) ?? [];
    assert.ok(names.length > 0, `${r.alert} reads an mcplane metric`);
    for (const name of names) assert.ok(exported.has(name), `${r.alert}: ${name} is exported`);
  }
});
