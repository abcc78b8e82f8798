// The checks of a try (spec.rollout.confirm.checks), run on the host after the update: each
// answers with what is wrong, or undefined when it holds. They run without the control plane
// (one of them is whether it is reachable), so a try whose change cut the host off still ends.

import { connect } from 'node:net';
import { request } from 'node:https';
import { describeTryCheck, type TryCheck } from '../machineconfig/index.ts';
import { commandProblem } from './health-gate.ts';

/** One attempt of a network check: a host that does not answer within this is not reachable. */
const ATTEMPT_MS = 5000;

export interface TryProbe {
  /** systemd's ActiveState of a unit. */
  activeState(unit: string): Promise<string>;
  /** Whether the agent's stream to the control plane is registered now. */
  controlPlaneConnected(): boolean;
}

/** The first check that does not hold, named with its cause; undefined when all hold. */
export async function tryProblem(checks: readonly TryCheck[], probe: TryProbe, leftMs: number): Promise<string | undefined> {
  for (const check of checks) {
    const problem = await checkProblem(check, probe, Math.max(1000, Math.min(ATTEMPT_MS, leftMs)));
    if (problem) return `${describeTryCheck(check)}: ${problem}`;
  }
  return undefined;
}

async function checkProblem(check: TryCheck, probe: TryProbe, timeoutMs: number): Promise<string | undefined> {
  if ('tcp' in check) return tcpProblem(check.tcp, timeoutMs);
  if ('https' in check) return httpsProblem(check.https, timeoutMs);
  if ('unit' in check) {
    try {
      const state = await probe.activeState(check.unit);
      return state === 'active' ? undefined : `not active (${state})`;
    } catch (err) {
      return `cannot read its state: ${(err as Error).message}`;
    }
  }
  if ('command' in check) {
    // commandProblem names the command itself: the reason keeps only its outcome after the check's name.
    const problem = await commandProblem(check.command, timeoutMs);
    return problem?.replace(/^command .*? (exited|was killed|did not finish|could not run)/, '$1');
  }
  return probe.controlPlaneConnected() ? undefined : 'not connected';
}

function tcpProblem(hostPort: string, timeoutMs: number): Promise<string | undefined> {
  const i = hostPort.lastIndexOf(':');
  const host = hostPort.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  const port = Number(hostPort.slice(i + 1));
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (problem: string | undefined): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(problem);
    };
    const timer = setTimeout(() => done(`no connection within ${timeoutMs / 1000}s`), timeoutMs);
    socket.once('connect', () => done(undefined));
    socket.once('error', (err) => done(`cannot connect: ${err.message}`));
  });
}

function httpsProblem(url: string, timeoutMs: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (problem: string | undefined): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(problem);
    };
    const req = request(url, { method: 'GET' }, (res) => {
      res.resume();
      const status = res.statusCode ?? 0;
      done(status >= 200 && status < 400 ? undefined : `answered HTTP ${status}`);
    });
    const timer = setTimeout(() => done(`no answer within ${timeoutMs / 1000}s`), timeoutMs);
    req.once('error', (err) => done(`cannot reach it: ${err.message}`));
    req.end();
  });
}
