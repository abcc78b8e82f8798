// Try mode (a pool's spec.rollout.confirm): each node applies a new config, then runs checks
// until they pass or the timeout ends; a timeout or a check still failing then makes the node
// revert by itself, without the control plane (the change may have cut it off). Talos'
// `--mode=try` is the model. The checks run on the host, so each names what it needs there: an
// endpoint the host must reach, a unit that must be active, a command that must exit 0, or the
// agent's own stream to the control plane.

import { durationMs } from './duration.ts';
import { join, type ProblemCollector } from './problem-collector.ts';

/** One thing that must hold on the node for its try to be confirmed. */
export type TryCheck =
  | { tcp: string }
  | { https: string }
  | { unit: string }
  | { command: string[] }
  | { controlPlane: true };

export interface TryPolicy {
  /** How long the node has to pass its checks (or be confirmed by hand) before it reverts: "5m". */
  timeout: string;
  checks: TryCheck[];
}

/** A try longer than a day is a typo, not a plan: the node waits to be confirmed all that time. */
const MAX_TRY_MS = 24 * 3600_000;
const CHECK_KINDS = ['tcp', 'https', 'unit', 'command', 'controlPlane'] as const;
const HOST_PORT = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;
const UNIT_NAME = /^[A-Za-z0-9:_.\\@-]+\.(service|socket|target|mount|automount|swap|path|timer|slice|scope|device)$/;

/** How a check is named in the node's reason and the preview: "tcp 10.0.0.1:6443", "unit crio.service". */
export function describeTryCheck(check: TryCheck): string {
  if ('tcp' in check) return `tcp ${check.tcp}`;
  if ('https' in check) return `https ${check.https}`;
  if ('unit' in check) return `unit ${check.unit}`;
  if ('command' in check) return `command ${check.command.join(' ')}`;
  return 'the control plane over the agent\'s stream';
}

/** The timeout in milliseconds (the policy was validated: it is a duration). */
export function tryTimeoutMs(policy: TryPolicy): number {
  return durationMs(policy.timeout) ?? 300_000;
}

/** Checks a try timeout as `mcctl apply --try` and spec.rollout.confirm.timeout take it; undefined when fine. */
export function tryTimeoutProblem(timeout: string): string | undefined {
  const ms = durationMs(timeout);
  if (ms === undefined || ms < 1000 || ms > MAX_TRY_MS) return `a try's timeout must be a duration from 1s to 24h such as 90s or 5m, got ${JSON.stringify(timeout)}`;
  return undefined;
}

/**
 * The try a node runs a config of a pool with. `appliedTimeout` is an `mcctl apply --try` recorded
 * for that config: its timeout wins, with the pool's own checks when it has some, else those the
 * pool already trusts (its health gate's units and command) and the agent's stream to the control
 * plane, the check a change that cuts the host off fails. Without one, the pool's
 * spec.rollout.confirm (undefined: the node does not try).
 */
export function effectiveTry(spec: { rollout?: { confirm?: TryPolicy }; healthCheck?: { units: string[]; command: string[] } }, appliedTimeout?: string): TryPolicy | undefined {
  const confirm = spec.rollout?.confirm;
  if (!appliedTimeout) return confirm;
  if (confirm?.checks.length) return { timeout: appliedTimeout, checks: confirm.checks };
  const gate = spec.healthCheck;
  return {
    timeout: appliedTimeout,
    checks: [
      ...(gate?.units ?? []).map((unit) => ({ unit })),
      ...(gate?.command.length ? [{ command: gate.command }] : []),
      { controlPlane: true as const },
    ],
  };
}

export function parseTryPolicy(raw: unknown, c: ProblemCollector, field = 'spec.rollout.confirm'): TryPolicy | undefined {
  const r = c.record(raw as never, field);
  if (!r) return undefined;
  c.onlyKeys(r, field, ['timeout', 'checks']);
  const timeout = c.string(r.timeout, field, 'timeout');
  if (timeout === undefined) c.add(join(field, 'timeout'), 'required', 'a try needs a timeout: how long the node has to pass its checks (or be confirmed) before it reverts, such as 5m');
  else {
    const problem = tryTimeoutProblem(timeout);
    if (problem) c.add(join(field, 'timeout'), 'duration', problem);
  }
  const checks: TryCheck[] = [];
  (c.array(r.checks, field, 'checks') ?? []).forEach((item, i) => {
    const at = `${join(field, 'checks')}[${i}]`;
    const check = c.record(item, at);
    if (!check) {
      if (item === undefined || item === null) c.add(at, 'type', 'must be an object naming one check');
      return;
    }
    const kinds = Object.keys(check).filter((k) => (CHECK_KINDS as readonly string[]).includes(k));
    c.onlyKeys(check, at, CHECK_KINDS);
    if (kinds.length !== 1) {
      c.add(at, 'one-check', `each check names exactly one of ${CHECK_KINDS.join(', ')}, got ${kinds.length ? kinds.join(' and ') : 'none'}`);
      return;
    }
    const kind = kinds[0]!;
    if (kind === 'tcp') {
      const v = c.string(check.tcp, at, 'tcp');
      const m = v === undefined ? null : HOST_PORT.exec(v);
      if (v !== undefined && (!m || Number(m[2]) < 1 || Number(m[2]) > 65535)) c.add(join(at, 'tcp'), 'host-port', `must be host:port with a port from 1 to 65535 (an IPv6 address in brackets), got ${JSON.stringify(v)}`);
      else if (v !== undefined) checks.push({ tcp: v });
    } else if (kind === 'https') {
      const v = c.string(check.https, at, 'https');
      let ok = false;
      try {
        ok = v !== undefined && new URL(v).protocol === 'https:';
      } catch {
        ok = false;
      }
      if (v !== undefined && !ok) c.add(join(at, 'https'), 'https-url', `must be an https:// URL, got ${JSON.stringify(v)}`);
      else if (v !== undefined) checks.push({ https: v });
    } else if (kind === 'unit') {
      const v = c.string(check.unit, at, 'unit');
      if (v !== undefined && !UNIT_NAME.test(v)) c.add(join(at, 'unit'), 'unit-name', `${JSON.stringify(v)} is not a systemd unit name (name.service, name.timer, ...)`);
      else if (v !== undefined) checks.push({ unit: v });
    } else if (kind === 'command') {
      const v = c.stringList(check.command, at, 'command');
      if (v !== undefined && (v.length === 0 || !v[0]!.startsWith('/'))) c.add(`${join(at, 'command')}[0]`, 'path-absolute', `the command runs without a shell or PATH: its first word must be an absolute path, got ${JSON.stringify(v[0] ?? '')}`);
      else if (v !== undefined) checks.push({ command: v });
    } else {
      const v = c.boolean(check.controlPlane, at, 'controlPlane');
      if (v === false) c.add(join(at, 'controlPlane'), 'control-plane', 'controlPlane: false checks nothing; leave the check out instead');
      else if (v === true) checks.push({ controlPlane: true });
    }
  });
  return timeout === undefined ? undefined : { timeout, checks };
}
