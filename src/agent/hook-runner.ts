// One action of a lifecycle hook, run as a transient systemd unit (StartTransientUnit) on the
// manager the agent already talks to: systemd owns the process, so the command gets its own
// cgroup, a clean environment and RuntimeMaxSec; at the timeout systemd kills the whole cgroup,
// children included. The unit's name is fixed per node, hook point and index, so an agent that
// was killed mid-hook finds the unit it left on restart and stops it before running it again:
// a hook never outlives the agent's step.
//
// Output: the unit's stdout and stderr go to a file the agent owns (StandardOutputFileToAppend)
// rather than the journal, because a systemd user manager (the sandbox's, and some hosts') has
// no journal to read back from; the last lines go into the node's reason.

import { closeSync, fstatSync, mkdirSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import type { HookAction, HookPoint, HookResult } from '../machineconfig/index.ts';
import { hookTimeoutMs } from '../machineconfig/index.ts';
import type { SystemdClient } from './systemd-client.ts';

/** How often the unit's state is read while the hook runs. */
const POLL_MS = 100;
/** systemd's SIGTERM then SIGKILL at the timeout: what a hook gets to clean up. */
const STOP_GRACE_MS = 5000;
/** The agent's own deadline past the hook's timeout: systemd should have killed it by then. */
const AGENT_GRACE_MS = STOP_GRACE_MS + 10_000;
const TAIL_LINES = 10;
const TAIL_BYTES = 8192;
const TAIL_CHARS = 600;

export interface HookRunContext {
  systemd: SystemdClient;
  node: string;
  /** Where the output files go (the agent's state directory). */
  outputDir: string;
  /** MCPLANE_HOOK, MCPLANE_FROM_CONFIG, MCPLANE_TO_CONFIG. */
  env: Record<string, string>;
}

export interface HookRun {
  result: HookResult;
  unit: string;
  /** The last lines of its output, joined with " | ". */
  tail: string;
}

/** mcplane-hook-<node>-<point>-<index>.service: node, hook and place in one name. */
export function hookUnitName(node: string, point: HookPoint, index: number): string {
  const safeNode = node.replace(/[^A-Za-z0-9:_.-]/g, '_');
  const safePoint = point.replace(/[A-Z]/g, (m) => `-${m.toLowerCase()}`);
  return `mcplane-hook-${safeNode}-${safePoint}-${index}.service`;
}

/** Stops and forgets a hook's unit (one left by a killed agent, or one past its timeout). */
export async function stopHookUnit(systemd: SystemdClient, unit: string): Promise<void> {
  const props = await systemd.unitProperties(unit, 'Unit', ['ActiveState']).catch(() => undefined);
  if (!props) return;
  if (props.ActiveState !== 'inactive' && props.ActiveState !== 'failed') await systemd.stopUnit(unit).catch(() => undefined);
  await systemd.resetFailedUnit(unit).catch(() => undefined);
}

export async function runHookAction(ctx: HookRunContext, point: HookPoint, index: number, action: HookAction): Promise<HookRun> {
  const unit = hookUnitName(ctx.node, point, index);
  const timeoutMs = hookTimeoutMs(action);
  await stopHookUnit(ctx.systemd, unit);
  mkdirSync(ctx.outputDir, { recursive: true, mode: 0o700 });
  const output = join(ctx.outputDir, `${unit}.log`);
  closeSync(openSync(output, 'w', 0o600));
  const env = { ...(action.env ?? {}), ...ctx.env };
  const properties: [string, string, unknown][] = [
    ['Description', 's', `mcplane lifecycle hook ${point}[${index}] on ${ctx.node}`],
    // exec: the start job fails when the command cannot be executed at all; RemainAfterExit keeps
    // a unit that exited 0 loaded, so its ExecMainStatus can be read before it is stopped.
    ['Type', 's', 'exec'],
    ['RemainAfterExit', 'b', true],
    ['ExecStart', 'a(sasb)', [[action.run[0]!, action.run, false]]],
    ['Environment', 'as', Object.entries(env).map(([k, v]) => `${k}=${v}`)],
    ['RuntimeMaxUSec', 't', BigInt(timeoutMs) * 1000n],
    ['TimeoutStopUSec', 't', BigInt(STOP_GRACE_MS) * 1000n],
    ['KillMode', 's', 'control-group'],
    ['StandardOutputFileToAppend', 's', output],
    ['StandardErrorFileToAppend', 's', output],
    ...(action.workDir ? [['WorkingDirectory', 's', action.workDir] as [string, string, unknown]] : []),
  ];
  const started = Date.now();
  const finish = async (result: HookResult['result'], exitStatus: number): Promise<HookRun> => {
    const durationMs = Date.now() - started;
    await stopHookUnit(ctx.systemd, unit);
    return { result: { point, index, argv: action.run, exitStatus, durationMs, result }, unit, tail: tailOf(output) };
  };
  try {
    await ctx.systemd.startTransientUnit(unit, properties);
  } catch (err) {
    // Could not be executed (no such file, not executable, no such directory): the unit failed.
    const props = await ctx.systemd.unitProperties(unit, 'Service', ['ExecMainStatus', 'ExecMainCode']).catch(() => undefined);
    const status = Number(props?.ExecMainCode) === 1 ? Number(props?.ExecMainStatus) : -1;
    const run = await finish('failed', status);
    return { ...run, tail: run.tail || (err as Error).message };
  }
  const deadline = started + timeoutMs + AGENT_GRACE_MS;
  for (;;) {
    const u = await ctx.systemd.unitProperties(unit, 'Unit', ['ActiveState', 'SubState']);
    if (!u) return finish('failed', -1); // unloaded: nothing left to read
    const ended = u.ActiveState === 'failed' || u.ActiveState === 'inactive' || (u.ActiveState === 'active' && u.SubState === 'exited');
    if (ended) {
      const s = (await ctx.systemd.unitProperties(unit, 'Service', ['Result', 'ExecMainStatus', 'ExecMainCode']))!;
      // ExecMainCode: 1 exited (ExecMainStatus is its status), 2 killed, 3 dumped core.
      const exited = Number(s.ExecMainCode) === 1;
      const status = exited ? Number(s.ExecMainStatus) : -1;
      if (s.Result === 'timeout') return finish('timeout', -1);
      return finish(exited && status === 0 && s.Result === 'success' ? 'success' : 'failed', status);
    }
    if (Date.now() > deadline) return finish('timeout', -1); // systemd did not: the agent stops it
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** The last lines of a hook's output, " | "-joined, bounded. */
function tailOf(file: string): string {
  let text = '';
  try {
    const fd = openSync(file, 'r');
    try {
      const size = fstatSync(fd).size;
      const buf = Buffer.alloc(Math.min(size, TAIL_BYTES));
      readSync(fd, buf, 0, buf.length, size - buf.length);
      text = buf.toString('utf8');
    } finally {
      closeSync(fd);
    }
  } catch {
    return '';
  }
  const lines = text.split('\n').map((l) => l.replace(/[\u0000-\u001f\u007f]/g, ' ').trim()).filter(Boolean).slice(-TAIL_LINES);
  const joined = lines.join(' | ');
  return joined.length <= TAIL_CHARS ? joined : `… ${joined.slice(-TAIL_CHARS)}`;
}

