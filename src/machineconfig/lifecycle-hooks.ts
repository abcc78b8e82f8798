// Lifecycle hooks (issue 34): the host's own commands, run by the agent before and after an
// update and before and after its reboot, as Flight Control's device hooks and Mender's state
// scripts do. A pool's spec.hooks and the mcplane.io/hooks annotation of a MachineConfig have
// the same shape; a node's hooks are its pool's, then each of its configs' in name order.
// An action may carry `if`: paths or globs (the syntax of spec.driftIgnore), and it runs only
// when the update changes one of them (Flight Control's path conditions).

import { parse } from 'yaml';
import { quote } from './control-characters.ts';
import { driftIgnoreMatcher, driftIgnoreProblem } from './drift-ignore.ts';
import { durationMs } from './duration.ts';
import { join, type ProblemCollector } from './problem-collector.ts';

export const HOOK_POINTS = ['beforeUpdating', 'afterUpdating', 'beforeRebooting', 'afterRebooting'] as const;
export type HookPoint = (typeof HOOK_POINTS)[number];

export interface HookAction {
  /** argv; argv[0] an absolute path (no shell, no PATH lookup). */
  run: string[];
  env?: Record<string, string>;
  /** A duration ("30s"); DEFAULT_HOOK_TIMEOUT when absent. */
  timeout?: string;
  workDir?: string;
  /** Paths or globs: the action runs only when the update changes one of them. */
  if?: string[];
}

export type LifecycleHooks = Partial<Record<HookPoint, HookAction[]>>;

/** The annotation of a MachineConfig whose value (YAML or JSON) is hooks that ship with the config. */
export const HOOKS_ANNOTATION = 'mcplane.io/hooks';
export const DEFAULT_HOOK_TIMEOUT = '30s';
/** A hook holds up the node's update all that time: an hour is a plan, longer is a typo. */
const MAX_HOOK_MS = 3600_000;
const MAX_ACTIONS_PER_POINT = 16;
const MAX_ARGV = 64;
const MAX_ARG_CHARS = 4096;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const ACTION_KEYS = ['run', 'env', 'timeout', 'workDir', 'if'] as const;

export function hookTimeoutMs(action: HookAction): number {
  return durationMs(action.timeout ?? DEFAULT_HOOK_TIMEOUT) ?? 30_000;
}

/** Reads spec.hooks (or the annotation's value): every bad field named with its rule. */
export function parseLifecycleHooks(raw: unknown, c: ProblemCollector, field = 'spec.hooks'): LifecycleHooks | undefined {
  if (raw === undefined || raw === null) return undefined;
  const r = c.record(raw as never, field);
  if (!r) return undefined;
  c.onlyKeys(r, field, HOOK_POINTS);
  const out: LifecycleHooks = {};
  for (const point of HOOK_POINTS) {
    const list = c.array(r[point], field, point);
    if (!list) continue;
    const at = join(field, point);
    if (list.length > MAX_ACTIONS_PER_POINT) c.add(at, 'hook-count', `at most ${MAX_ACTIONS_PER_POINT} actions per hook point, got ${list.length}`);
    const actions = list.slice(0, MAX_ACTIONS_PER_POINT).flatMap((item, i) => {
      const a = parseAction(item, c, `${at}[${i}]`);
      return a ? [a] : [];
    });
    if (actions.length) out[point] = actions;
  }
  return Object.keys(out).length ? out : undefined;
}

function parseAction(item: unknown, c: ProblemCollector, at: string): HookAction | undefined {
  const a = c.record(item as never, at);
  if (!a) {
    if (item === undefined || item === null) c.add(at, 'type', 'must be an object with run: [command, args...]');
    return undefined;
  }
  c.onlyKeys(a, at, ACTION_KEYS);
  const before = c.problems.length;
  const run = c.stringList(a.run, at, 'run');
  if (run === undefined) c.add(join(at, 'run'), 'required', 'an action needs run: the command and its arguments, such as [/usr/bin/systemctl, stop, haproxy]');
  else if (run.length === 0 || !run[0]!.startsWith('/')) c.add(`${join(at, 'run')}[0]`, 'path-absolute', `the command runs without a shell or PATH: its first word must be an absolute path, got ${JSON.stringify(run[0] ?? '')}`);
  else if (run.length > MAX_ARGV) c.add(join(at, 'run'), 'argv-length', `at most ${MAX_ARGV} words, got ${run.length}`);
  else run.forEach((w, i) => {
    if (w.length > MAX_ARG_CHARS || w.includes('\u0000')) c.add(`${join(at, 'run')}[${i}]`, 'argument', `a word may not hold a NUL byte or be longer than ${MAX_ARG_CHARS} characters`);
  });
  const action: HookAction = { run: run ?? [] };
  const envRaw = c.record(a.env as never, at, 'env');
  if (envRaw) {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(envRaw)) {
      if (!ENV_NAME.test(k)) c.add(join(join(at, 'env'), k), 'env-name', `${quote(k, 60)} is not an environment variable name (letters, digits and _, not starting with a digit)`);
      else if (k.startsWith('MCPLANE_')) c.add(join(join(at, 'env'), k), 'env-reserved', `names starting with MCPLANE_ are set by the agent (MCPLANE_HOOK, MCPLANE_FROM_CONFIG, MCPLANE_TO_CONFIG)`);
      else if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') c.add(join(join(at, 'env'), k), 'type', 'must be a string');
      else if (CONTROL.test(String(v).replace(/\t/g, ''))) c.add(join(join(at, 'env'), k), 'env-value', 'may not hold a control character such as a newline');
      else env[k] = String(v);
    }
    if (Object.keys(env).length) action.env = env;
  }
  const timeout = c.string(a.timeout as never, at, 'timeout');
  if (timeout !== undefined) {
    const ms = durationMs(timeout);
    if (ms === undefined || ms < 1000 || ms > MAX_HOOK_MS) c.add(join(at, 'timeout'), 'duration', `a hook's timeout must be a duration from 1s to 1h such as 30s or 5m, got ${JSON.stringify(timeout)}`);
    else action.timeout = timeout;
  }
  const workDir = c.string(a.workDir as never, at, 'workDir');
  if (workDir !== undefined) {
    if (!workDir.startsWith('/') || CONTROL.test(workDir) || workDir.split('/').some((s) => s === '..' || s === '.')) c.add(join(at, 'workDir'), 'path-absolute', `must be an absolute path without "." or ".." segments, got ${quote(workDir, 60)}`);
    else action.workDir = workDir;
  }
  const conditions = c.stringList(a.if as never, at, 'if');
  if (conditions !== undefined) {
    if (conditions.length === 0) c.add(join(at, 'if'), 'if-empty', 'an empty if never matches: leave it out to run the action on every update');
    conditions.forEach((g, i) => {
      const problem = driftIgnoreProblem(g);
      if (problem) c.add(`${join(at, 'if')}[${i}]`, 'path-glob', problem);
    });
    if (conditions.length) action.if = conditions;
  }
  return c.problems.length === before && run ? action : undefined;
}

/** Reads the mcplane.io/hooks annotation of a MachineConfig (YAML or JSON); undefined when absent. */
export function parseHooksAnnotation(annotations: Record<string, string> | undefined, c: ProblemCollector): LifecycleHooks | undefined {
  const text = annotations?.[HOOKS_ANNOTATION];
  if (text === undefined) return undefined;
  const field = `metadata.annotations[${HOOKS_ANNOTATION}]`;
  let value: unknown;
  try {
    value = parse(text, { version: '1.1', merge: true, uniqueKeys: true, maxAliasCount: 0 });
  } catch (err) {
    c.add(field, 'hooks-annotation', `is not YAML or JSON: ${(err as Error).message.split('\n')[0]}`);
    return undefined;
  }
  if (value === null || typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) {
    c.add(field, 'hooks-annotation', `must be an object of hook points (${HOOK_POINTS.join(', ')})`);
    return undefined;
  }
  return parseLifecycleHooks(value, c, field);
}

/** The pool's hooks, then each config's in name order (the rendered config's order). */
export function mergeLifecycleHooks(pool: LifecycleHooks | undefined, configs: readonly { name: string; hooks: LifecycleHooks | undefined }[]): LifecycleHooks {
  const out: LifecycleHooks = {};
  const sorted = [...configs].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const point of HOOK_POINTS) {
    const all = [...(pool?.[point] ?? []), ...sorted.flatMap((x) => x.hooks?.[point] ?? [])];
    if (all.length) out[point] = all;
  }
  return out;
}

/**
 * The paths an update changes, as `if` conditions match them: its files, and its units as the
 * files /etc/systemd/system/<name> (where a config's units live on a host).
 */
// Takes the diff's shape, not its type: config-diff.ts reaches types.ts, which names this file's types.
export function hookChangedPaths(diff: { files: readonly { path: string }[]; units: readonly { name: string }[] }): string[] {
  return [...diff.files.map((f) => f.path), ...diff.units.map((u) => `/etc/systemd/system/${u.name}`)];
}

/** Whether the action runs for an update changing `changedPaths` (no `if`: always). */
export function hookApplies(action: HookAction, changedPaths: readonly string[]): boolean {
  if (!action.if) return true;
  const matches = driftIgnoreMatcher(action.if);
  return changedPaths.some(matches);
}

/** How an action is named in the node's reason, its history and the preview. */
export function describeHookAction(point: HookPoint, index: number, action: HookAction): string {
  return `${point}[${index}] ${action.run.join(' ')}`;
}

/** The preview's text: "beforeRebooting: /usr/bin/flush; afterUpdating: /bin/x (if /etc/x)", "" for none. */
export function describeLifecycleHooks(hooks: LifecycleHooks, changedPaths?: readonly string[]): string {
  return HOOK_POINTS.flatMap((point) => {
    const actions = (hooks[point] ?? []).filter((a) => !changedPaths || hookApplies(a, changedPaths));
    return actions.length ? [`${point}: ${actions.map((a) => a.run.join(' ')).join(', ')}`] : [];
  }).join('; ');
}

/** One action as it ran (or was skipped), as the node's history keeps it. */
export interface HookResult {
  point: HookPoint;
  index: number;
  argv: string[];
  /** The exit status; -1 when it did not exit by itself (killed at its timeout, could not start). */
  exitStatus: number;
  durationMs: number;
  /** success, failed, timeout, skipped (its `if` matched no changed path) */
  result: 'success' | 'failed' | 'timeout' | 'skipped';
}
