// mcplane's rollout-safety fields of a pool: spec.rollout (canaries, soak, circuit breaker) and
// spec.healthCheck (what must hold on a node after each update). MCO has neither; Flight Control's
// batches and success thresholds and Talos' timed try-and-revert are the models.

import { durationMs } from './duration.ts';
import { join, type ProblemCollector } from './problem-collector.ts';
import { parseTryPolicy } from './try-policy.ts';
import type { HealthCheck, RolloutFailureAction, RolloutPolicy } from './types.ts';

const PERCENT = /^(\d+)%$/;
const FAILURE_ACTIONS: readonly RolloutFailureAction[] = ['Pause', 'Rollback'];
/** A soak longer than a week is a typo, not a plan (and time past Date's range would throw). */
const MAX_SOAK_MS = 7 * 24 * 3600_000;
/** A health check longer than this is a typo, not a plan: the node stays Working all that time. */
const MAX_HEALTH_TIMEOUT_MS = 60 * 60 * 1000;
/** A systemd unit name, as systemd accepts it (unit-name.c: valid characters and a known suffix). */
const UNIT_NAME = /^[A-Za-z0-9:_.\\@-]+\.(service|socket|target|mount|automount|swap|path|timer|slice|scope|device)$/;


export function parseRolloutPolicy(raw: unknown, c: ProblemCollector, field = 'spec.rollout'): RolloutPolicy | undefined {
  const r = c.record(raw, field);
  if (!r) return undefined;
  c.onlyKeys(r, field, ['canary', 'soak', 'maxFailures', 'onFailure', 'staging', 'maxStaging', 'confirm']);
  const out: RolloutPolicy = { maxFailures: 0, onFailure: 'Pause' };
  if (r.canary !== undefined && r.canary !== null) {
    const v = r.canary;
    if (typeof v === 'number' && Number.isInteger(v) && v >= 0) out.canary = v;
    else if (typeof v === 'string' && PERCENT.test(v) && Number(PERCENT.exec(v)![1]) <= 100) out.canary = v;
    else c.add(join(field, 'canary'), 'canary', `canary must be a whole number of nodes or a percentage from 0% to 100%, got ${JSON.stringify(v)}`);
  }
  const soak = c.string(r.soak, field, 'soak');
  if (soak !== undefined) {
    const ms = durationMs(soak);
    if (ms === undefined || ms > MAX_SOAK_MS) c.add(join(field, 'soak'), 'duration', `soak must be a duration of at most 7d such as 90s, 10m or 1h30m (units d, h, m, s), got ${JSON.stringify(soak)}`);
    else out.soak = soak;
  }
  const max = c.integer(r.maxFailures, field, 'maxFailures');
  if (max !== undefined) {
    if (max < 0) c.add(join(field, 'maxFailures'), 'max-failures', `maxFailures must be 0 or more, got ${max}`);
    else out.maxFailures = max;
  }
  const action = c.string(r.onFailure, field, 'onFailure');
  if (action !== undefined) {
    if (FAILURE_ACTIONS.includes(action as RolloutFailureAction)) out.onFailure = action as RolloutFailureAction;
    else c.add(join(field, 'onFailure'), 'on-failure', `onFailure "${action}" is not one of ${FAILURE_ACTIONS.join(', ')}`);
  }
  const staging = c.string(r.staging, field, 'staging');
  if (staging !== undefined) {
    if (staging === 'Enabled' || staging === 'Disabled') out.staging = staging;
    else c.add(join(field, 'staging'), 'staging', `staging "${staging}" is not one of Enabled, Disabled (Enabled: download a node's OS content while it serves, before its drain)`);
  }
  if (r.maxStaging !== undefined && r.maxStaging !== null) {
    const v = r.maxStaging;
    if (typeof v === 'number' && Number.isInteger(v) && v >= 1) out.maxStaging = v;
    else if (typeof v === 'string' && PERCENT.test(v) && Number(PERCENT.exec(v)![1]) >= 1 && Number(PERCENT.exec(v)![1]) <= 100) out.maxStaging = v;
    else c.add(join(field, 'maxStaging'), 'max-staging', `maxStaging must be a whole number of nodes (1 or more) or a percentage from 1% to 100%, got ${JSON.stringify(v)}`);
  }
  const confirm = parseTryPolicy(r.confirm, c, join(field, 'confirm'));
  if (confirm) out.confirm = confirm;
  if (out.soak && durationMs(out.soak)! > 0 && !out.canary) {
    c.add(join(field, 'soak'), 'soak-needs-canary', 'a soak needs canaries to soak: set canary to a count or a percentage of the pool\'s nodes');
  }
  return out;
}

export function parseHealthCheck(raw: unknown, c: ProblemCollector, field = 'spec.healthCheck'): HealthCheck | undefined {
  const r = c.record(raw, field);
  if (!r) return undefined;
  c.onlyKeys(r, field, ['units', 'command', 'timeout']);
  const units = c.stringList(r.units, field, 'units') ?? [];
  units.forEach((u, i) => {
    if (!UNIT_NAME.test(u)) c.add(`${join(field, 'units')}[${i}]`, 'unit-name', `${JSON.stringify(u)} is not a systemd unit name (name.service, name.timer, ...)`);
  });
  const command = c.stringList(r.command, field, 'command') ?? [];
  if (command.length > 0 && !command[0]!.startsWith('/')) {
    c.add(`${join(field, 'command')}[0]`, 'path-absolute', `the command runs without a shell or PATH: its first word must be an absolute path, got ${JSON.stringify(command[0])}`);
  }
  if (units.length === 0 && command.length === 0) c.add(field, 'required', 'a health check needs units that must be active, a command that must succeed, or both');
  const timeout = c.string(r.timeout, field, 'timeout') ?? '2m';
  const ms = durationMs(timeout);
  if (ms === undefined || ms === 0 || ms > MAX_HEALTH_TIMEOUT_MS) {
    c.add(join(field, 'timeout'), 'duration', `timeout must be a duration from 1s to 1h such as 30s or 2m, got ${JSON.stringify(timeout)}`);
  }
  return { units, command, timeout };
}
