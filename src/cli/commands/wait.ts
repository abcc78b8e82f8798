// mcctl wait pool/NAME --for=condition=Updated and mcctl rollout status pool/NAME: follow a pool
// over StatusService.Watch with a live progress display, and end with an exit code a script can
// use: 0 when the pool reaches the condition, 1 with the reasons when a node degrades, the
// render fails, or the time runs out.

import { ConfigurationError, FAILED_NODE_STATES, WaitFailedError } from '../../machineconfig/index.ts';
import type { MachineConfigPool__Output } from '../../runtime/generated/mcplane/v1/MachineConfigPool.ts';
import type { Node__Output } from '../../runtime/generated/mcplane/v1/Node.ts';
import type { Clients } from '../client/connection.ts';
import { watchWithReconnect } from '../client/watch-stream.ts';
import { forDisplay, shown as escaped } from '../format.ts';
import { condition } from '../objects.ts';
import { resourceOf } from '../resources.ts';
import type { Io } from './read.ts';

export interface WaitOptions {
  /** "condition=Updated" or "condition=Updated=False". */
  for: string;
  timeoutMs: number;
  /** Redraw the display in place (stdout is a terminal) rather than print a line per change. */
  tty: boolean;
  /** rollout status: phrase the result as kubectl's rollout status does. */
  rollout: boolean;
}

/** kubectl's durations: 30s, 10m, 1h30m, 500ms; a bare number is seconds; 0 is no limit. */
export function parseDuration(text: string, flag = '--timeout'): number {
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) * 1000;
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  const rest = text.replace(/(\d+(?:\.\d+)?)(ms|s|m|h)/g, (_, n: string, unit: string) => { total += Number(n) * units[unit]!; return ''; });
  if (rest !== '' || text === '') throw new ConfigurationError(`${flag} ${text}: not a duration (e.g. 30s, 10m, 1h)`);
  return total;
}

function poolTarget(target: string): string {
  const slash = target.indexOf('/');
  if (slash <= 0 || resourceOf(target.slice(0, slash)) !== 'pools' || slash === target.length - 1) {
    throw new ConfigurationError(`"${target}": give the pool as pool/NAME (waiting works on pools)`);
  }
  return target.slice(slash + 1);
}

function parseFor(text: string): { type: string; status: string } {
  const m = /^condition=([A-Za-z]+)(?:=(True|False|Unknown))?$/i.exec(text);
  if (!m) throw new ConfigurationError(`--for=${text}: use --for=condition=NAME (e.g. condition=Updated) or condition=NAME=False`);
  const type = m[1]!;
  const status = m[2] ? m[2][0]!.toUpperCase() + m[2].slice(1).toLowerCase() : 'True';
  return { type: type[0]!.toUpperCase() + type.slice(1), status };
}

const isWorking = (n: Node__Output): boolean =>
  n.status?.state === 'Working' || (!!n.status?.desiredConfig && n.status.desiredConfig !== n.status.currentConfig);
// RolledBack, TryReverted: the node's update failed its health gate or its try; it waits for an operator or a new config.
const isDegraded = (n: Node__Output): boolean => FAILED_NODE_STATES.has(n.status?.state ?? '');

/** The display: a summary line, then one line per node at work or degraded. */
export function progressLines(name: string, reportedPool: MachineConfigPool__Output | undefined, reportedNodes: Node__Output[]): string[] {
  // Reasons and phases come from the nodes: shown with their control characters escaped (format.ts).
  const [pool, nodes] = forDisplay([reportedPool, reportedNodes] as const);
  if (!pool) return [`pool/${name}: waiting for the pool to exist`];
  const s = pool.status;
  const working = nodes.filter((n) => isWorking(n) && !isDegraded(n));
  const degraded = nodes.filter(isDegraded);
  const lines = [`pool/${name}: ${s?.updatedMachineCount ?? 0}/${s?.machineCount ?? 0} nodes updated to ${s?.configuration || '<none>'}` +
    `, ${working.length} working${degraded.length ? `, ${degraded.length} degraded` : ''}${pool.paused ? ' (paused)' : ''}`];
  for (const n of working) lines.push(`  ${n.name}: ${n.status?.state === 'Working' ? n.status.phase || 'working' : 'assigned, not started'}${n.status?.connected === false ? ' (disconnected)' : ''}`);
  for (const n of degraded) lines.push(`  ${n.name}: ${n.status?.state}: ${n.status?.reason || '<no reason reported>'}`);
  return lines;
}

export function waitCommand(c: Clients, io: Io, target: string, options: WaitOptions): Promise<void> {
  const name = poolTarget(target);
  const want = options.rollout ? { type: 'Updated', status: 'True' } : parseFor(options.for);
  // Degradation ends a wait for the pool to be Updated; a wait for anything else (say, for
  // Degraded itself) only ends on its own condition or the timeout.
  const failOnDegraded = want.type === 'Updated' && want.status === 'True';
  let pool: MachineConfigPool__Output | undefined;
  const nodes = new Map<string, Node__Output>();
  let shown: string[] = [];
  let settled = false;

  const draw = (lines: string[]): void => {
    if (options.tty) {
      // Move to the start of the previous display, clear it and everything below, redraw.
      const up = shown.length ? `\x1b[${shown.length}F` : '';
      io.out(`${up}\x1b[J${lines.join('\n')}\n`);
    } else {
      // Only the lines that changed: a log of the rollout, not a repeated screen.
      const previous = new Set(shown);
      const fresh = lines.filter((l) => !previous.has(l));
      if (fresh.length) io.out(fresh.join('\n') + '\n');
    }
    shown = lines;
  };

  return new Promise<void>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const finish = (err?: Error, message?: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      handle.stop();
      if (message) io.out(message + '\n');
      if (err) reject(err);
      else resolve();
    };
    const poolNodes = (): Node__Output[] => [...nodes.values()].filter((n) => n.pool === name).sort((a, b) => (a.name < b.name ? -1 : 1));
    const evaluate = (): void => {
      if (settled) return;
      const members = poolNodes();
      draw(progressLines(name, pool, members));
      if (!pool) return;
      if (condition(pool, want.type) === want.status) {
        const s = pool.status;
        return finish(undefined, options.rollout
          ? `pool/${name} successfully rolled out: ${s?.updatedMachineCount ?? 0}/${s?.machineCount ?? 0} nodes on ${s?.configuration || '<none>'}`
          : `pool/${name} condition met: ${want.type}=${want.status}`);
      }
      if (!failOnDegraded) return;
      const reasons: string[] = [];
      for (const type of ['RenderDegraded', 'Degraded']) {
        const cond = pool.status?.conditions.find((x) => x.type === type && x.status === 'True');
        if (cond && (type === 'RenderDegraded' || !members.some(isDegraded))) reasons.push(`${type}: ${escaped(cond.message)}`);
      }
      for (const n of members.filter(isDegraded)) reasons.push(`node ${n.name} is ${escaped(n.status?.state ?? '')}: ${escaped(n.status?.reason || '<no reason reported>')}`);
      if (reasons.length) finish(new WaitFailedError(`pool/${name} will not become ${want.type} without help:\n${reasons.map((r) => `  - ${r}`).join('\n')}`));
    };
    const handle = watchWithReconnect(c, {
      pools: true,
      nodes: true,
      notice: io.err,
      onSnapshot(events) {
        pool = undefined;
        nodes.clear();
        for (const e of events) {
          if (e.pool?.name === name) pool = e.pool;
          if (e.node) nodes.set(e.node.name, e.node);
        }
        if (!pool) return finish(new WaitFailedError(`MachineConfigPool/${name} not found`));
        evaluate();
      },
      onChange(e) {
        if (e.pool?.name === name) {
          if (e.type === 'DELETED') return finish(new WaitFailedError(`MachineConfigPool/${name} was deleted while waiting`));
          pool = e.pool;
        } else if (e.node) {
          if (e.type === 'DELETED') nodes.delete(e.node.name);
          else nodes.set(e.node.name, e.node);
        } else {
          return;
        }
        evaluate();
      },
    });
    handle.done.then(() => finish(), (err: Error) => finish(err));
    if (options.timeoutMs > 0) {
      timer = setTimeout(() => {
        const summary = progressLines(name, pool, poolNodes());
        finish(new WaitFailedError(`timed out after ${options.timeoutMs / 1000}s waiting for pool/${name} to be ${want.type}=${want.status}:\n${summary.map((l) => `  ${l.trimStart()}`).join('\n')}`));
      }, options.timeoutMs);
    }
    process.once('SIGINT', () => finish(new WaitFailedError(`interrupted while waiting for pool/${name}`)));
  });
}
