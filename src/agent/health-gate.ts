// The node health gate (a pool's spec.healthCheck): after an update (after its reboot, if it had
// one), the listed units must be active and the command must exit 0, within the timeout. The
// gate polls until both hold or the time is up; the last cause is what the node reports when it
// rolls back: which unit is not active, or the command's exit code and its last output lines.

import { spawn } from 'node:child_process';
import { durationMs, type HealthCheck } from '../machineconfig/index.ts';

/** Lines of the command's output kept for the node's reason, and how long each may be. */
const OUTPUT_LINES = 3;
const LINE_CHARS = 200;
const POLL_MS = 1000;

export interface HealthProbe {
  /** systemd's ActiveState of a unit (active, failed, inactive, activating, ...). */
  activeState(unit: string): Promise<string>;
}

/** Resolves to undefined when the node is healthy within the timeout, else to the cause. */
export async function runHealthGate(check: HealthCheck, probe: HealthProbe, now: () => number = Date.now): Promise<string | undefined> {
  const deadline = now() + (durationMs(check.timeout) ?? 120_000);
  for (;;) {
    const cause = await healthProblem(check, probe, deadline, now);
    if (!cause) return undefined;
    const left = deadline - now();
    if (left <= 0) return `${cause} (after ${check.timeout}, the health check's timeout)`;
    await new Promise((r) => setTimeout(r, Math.min(POLL_MS, left)));
  }
}

async function healthProblem(check: HealthCheck, probe: HealthProbe, deadline: number, now: () => number): Promise<string | undefined> {
  for (const unit of check.units) {
    let state: string;
    try {
      state = await probe.activeState(unit);
    } catch (err) {
      return `unit ${unit}: cannot read its state: ${(err as Error).message}`;
    }
    if (state !== 'active') return `unit ${unit} is not active (${state})`;
  }
  if (check.command.length === 0) return undefined;
  return commandProblem(check.command, Math.max(1000, deadline - now()));
}

/** Runs argv (no shell): undefined when it exits 0, else how it failed with its last output lines. */
export async function commandProblem(argv: string[], timeoutMs: number): Promise<string | undefined> {
  const r = await runCommand(argv, timeoutMs);
  if (r.code === 0) return undefined;
  const how = r.error ? `could not run: ${r.error}` : r.timedOut ? 'did not finish before the timeout' : r.signal ? `was killed by ${r.signal}` : `exited ${r.code}`;
  return `command ${shown(argv)} ${how}${r.tail ? `: ${r.tail}` : ''}`;
}

/** The command as the reason names it: a long inline script is cut, its output says the rest. */
function shown(argv: string[]): string {
  const text = argv.join(' ');
  return text.length <= COMMAND_CHARS ? text : `${text.slice(0, COMMAND_CHARS)}…`;
}
const COMMAND_CHARS = 40;

interface CommandResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  error?: string;
  /** The last lines of stdout and stderr, joined with " | ". */
  tail: string;
}

/** Runs argv without a shell, keeping only the end of its output (a chatty check must not fill memory). */
function runCommand(argv: string[], timeoutMs: number): Promise<CommandResult> {
  return new Promise((resolve) => {
    let out = '';
    let timedOut = false;
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer): void => { out = (out + chunk.toString('utf8')).slice(-8192); };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => { timedOut = true; child.kill('SIGKILL'); }, timeoutMs);
    const tail = (): string => out.split('\n').map((l) => l.trim()).filter(Boolean).slice(-OUTPUT_LINES).map((l) => l.slice(0, LINE_CHARS)).join(' | ');
    child.once('error', (err) => {
      clearTimeout(timer);
      resolve({ code: null, signal: null, timedOut, error: err.message, tail: '' });
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, timedOut, tail: tail() });
    });
  });
}
