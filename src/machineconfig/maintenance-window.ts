// When a pool's nodes may be drained or rebooted (mcplane addition; MCO has only `paused`, and its
// maintenance-schedule proposal was never merged). A window opens at each time its cron schedule
// names, in its IANA time zone, and stays open for its duration. Evaluated against the time the
// caller passes (the control plane's Clock), so tests move time instead of waiting for it.
// croner does the cron and time-zone arithmetic, DST changes included: a start that falls in a
// skipped hour moves to the first valid time, as cron implementations do.

import { Cron } from 'croner';
import { durationMs } from './duration.ts';
import { join, type ProblemCollector } from './problem-collector.ts';
import type { MachineConfigPoolSpec, MaintenanceWindow, MaintenanceWindowScope } from './types.ts';

export const WINDOW_SCOPES: readonly MaintenanceWindowScope[] = ['Disruptive', 'All'];

/** Every reconcile evaluates every window: a pool needs a handful, not thousands. */
export const MAX_WINDOWS = 20;
const MAX_DURATION_MS = 7 * 24 * 3600_000;


export function isKnownTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

export function parseMaintenanceWindows(raw: unknown, c: ProblemCollector, field: string): MaintenanceWindow[] | undefined {
  const list = c.array(raw, field);
  if (!list) return undefined;
  if (list.length > MAX_WINDOWS) {
    c.add(field, 'max-windows', `a pool may have at most ${MAX_WINDOWS} maintenance windows, got ${list.length}: combine schedules (cron lists such as "0 2 * * 1,3,5")`);
    return undefined;
  }
  const out: MaintenanceWindow[] = [];
  list.forEach((rawEntry, i) => {
    const f = `${field}[${i}]`;
    const entry = c.record(rawEntry, f);
    if (!entry) return;
    c.onlyKeys(entry, f, ['schedule', 'duration', 'timeZone']);
    const schedule = c.string(entry.schedule, f, 'schedule');
    const duration = c.string(entry.duration, f, 'duration');
    const timeZone = c.string(entry.timeZone, f, 'timeZone') ?? 'UTC';
    let ok = true;
    if (!isKnownTimeZone(timeZone)) {
      c.add(join(f, 'timeZone'), 'time-zone', `unknown time zone "${timeZone}": use an IANA name such as UTC, Europe/Berlin or America/New_York`);
      ok = false;
    }
    if (schedule === undefined) {
      c.add(join(f, 'schedule'), 'required', 'a maintenance window needs a schedule (five-field cron, e.g. "0 2 * * 6" for Saturdays at 02:00)');
      ok = false;
    } else {
      const problem = cronProblem(schedule, ok ? timeZone : 'UTC');
      if (problem) {
        c.add(join(f, 'schedule'), 'cron', `schedule "${schedule}" is not a valid five-field cron expression (minute hour day-of-month month day-of-week): ${problem}`);
        ok = false;
      }
    }
    const ms = duration === undefined ? undefined : durationMs(duration);
    if (duration === undefined) {
      c.add(join(f, 'duration'), 'required', 'a maintenance window needs a duration, e.g. "2h" or "90m"');
      ok = false;
    } else if (ms === undefined || ms <= 0 || ms > MAX_DURATION_MS) {
      c.add(join(f, 'duration'), 'duration', `duration "${duration}" must be a duration such as "2h", "90m" or "1h30m" (units d, h, m, s), more than 0 and at most 7d`);
      ok = false;
    }
    if (ok) out.push({ schedule: schedule!, duration: duration!, timeZone });
  });
  return out;
}

function cronProblem(schedule: string, timeZone: string): string | undefined {
  const fields = schedule.trim().split(/\s+/);
  if (fields.length !== 5) return `it has ${fields.length} field${fields.length === 1 ? '' : 's'}, not 5`;
  try {
    const cron = new Cron(schedule, { timezone: timeZone, paused: true });
    // An expression that can never fire (Feb 30) is as wrong as a malformed one.
    if (!cron.nextRun(new Date(0))) return 'it never fires';
  } catch (err) {
    return (err as Error).message;
  }
  return undefined;
}

export interface WindowState {
  /** True when some window is open at `now`. */
  open: boolean;
  /** While open: when the latest-ending open window closes. */
  closesAt?: number;
  /** While open: when that window opened. */
  openedAt?: number;
  /** The next time a window opens after `now` (absent without windows). */
  nextStart?: number;
}

/**
 * Each pool's last answer, with the span of time over which it holds: from the `now` it was
 * computed for until the next edge (the open window closes or the next one opens), nothing it
 * says can change. Keyed by the windows array itself, which belongs to one stored version of the
 * pool. Asking croner costs about 10 ms (it walks back over up to 64 earlier starts), and
 * rollout, pool status, drains and previews all ask on every pass.
 */
const answers = new WeakMap<readonly MaintenanceWindow[], { from: number; until: number; state: WindowState }>();

/** Whether the pool's windows are open at `now`, and when the next one opens. */
export function windowState(windows: readonly MaintenanceWindow[], now: number): WindowState {
  const kept = answers.get(windows);
  if (kept && now >= kept.from && now < kept.until) return kept.state;
  // Shared by every caller until the next edge: frozen, so that none can change it for the others.
  const state = Object.freeze(computeWindowState(windows, now));
  answers.set(windows, { from: now, until: Math.min(state.closesAt ?? Infinity, state.nextStart ?? Infinity), state });
  return state;
}

function computeWindowState(windows: readonly MaintenanceWindow[], now: number): WindowState {
  let closesAt: number | undefined;
  let openedAt: number | undefined;
  let nextStart: number | undefined;
  for (const w of windows) {
    const length = durationMs(w.duration) ?? 0;
    const cron = new Cron(w.schedule, { timezone: w.timeZone, paused: true });
    // Starts within one duration before now: any of them may still be open (windows may overlap).
    for (const start of cron.previousRuns(64, new Date(now + 1))) {
      const s = start.getTime();
      if (s + length <= now) break;
      if (closesAt === undefined || s + length > closesAt) {
        closesAt = s + length;
        openedAt = s;
      }
    }
    const next = cron.nextRun(new Date(now))?.getTime();
    if (next !== undefined && (nextStart === undefined || next < nextStart)) nextStart = next;
  }
  return { open: closesAt !== undefined, ...(closesAt !== undefined ? { closesAt, openedAt } : {}), ...(nextStart !== undefined ? { nextStart } : {}) };
}

/** Whether an update with this action must wait for the pool's window. */
export function waitsForWindow(spec: Pick<MachineConfigPoolSpec, 'maintenanceWindows' | 'maintenanceWindowScope'>, disruptive: boolean): boolean {
  if (!spec.maintenanceWindows?.length) return false;
  return disruptive || spec.maintenanceWindowScope === 'All';
}

/**
 * "3d4h", "5h", "1h42m", "42m", "<1m": coarse on purpose (hours once two hours or more away), so
 * a condition message that shows it changes, and is rewritten, at most hourly until the last two.
 */
export function formatWait(ms: number): string {
  if (ms <= 60_000) return '<1m';
  const m = Math.ceil(ms / 60_000);
  const d = Math.floor(m / 1440);
  const h = Math.floor((m % 1440) / 60);
  const min = m % 60;
  if (d > 0) return `${d}d${h ? `${h}h` : ''}`;
  if (h >= 2) return `${h}h`;
  if (h > 0) return `${h}h${min ? `${min}m` : ''}`;
  return `${min}m`;
}

/** How long until formatWait(ms) would print something else: when to refresh a message. */
export function formatWaitChangesIn(ms: number): number {
  if (ms <= 60_000) return Math.max(1000, ms); // "<1m" until the edge itself
  const unit = ms >= 2 * 3600_000 ? 3600_000 : 60_000;
  return (ms - 1) % unit + 1;
}
