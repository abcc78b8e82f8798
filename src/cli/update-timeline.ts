// The end of `mcctl describe node`: the node's last updates, one block each (from -> to, result,
// reason, the disruption), each phase with its start and how long it took.

import type { UpdateRecord__Output } from '../runtime/generated/mcplane/v1/UpdateRecord.ts';
import { forDisplay } from './format.ts';

/** 850ms, 12s, 3m05s, 1h02m: short enough for a column, exact enough to compare phases. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${(ms / 1000).toFixed(s < 10 ? 1 : 0)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

const clock = (ms: number): string => (ms ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '<unknown>');

/** Oldest first, as stored; the running update (if any) last, marked as running. */
export function formatTimeline(reported: UpdateRecord__Output[], current: UpdateRecord__Output | null | undefined, now = Date.now()): string {
  // Reasons and phase names come from the node: shown with their control characters escaped.
  const [updates, running] = forDisplay([reported, current] as const);
  const all = [...updates];
  if (running && !all.some((u) => u.id === running.id)) all.push(running);
  if (all.length === 0) return 'Updates:         <none>\n';
  const lines = [`Updates:         ${updates.length} kept, oldest first${running ? '; the last one is running' : ''}`];
  for (const u of all) {
    const result = u.result || 'Running';
    const took = u.endedUnixMs ? duration(u.endedUnixMs - u.startedUnixMs) : `${duration(now - u.startedUnixMs)} so far`;
    lines.push(`  ${u.fromConfig || '<none>'} -> ${u.toConfig}`);
    lines.push(`    Result:      ${result}${u.reason ? `: ${u.reason}` : ''}`);
    if (u.cause) lines.push(`    Cause:       ${u.cause}`);
    lines.push(`    Started:     ${clock(u.startedUnixMs)} (took ${took})`);
    lines.push(`    Disruption:  ${u.disruption || '<none>'}`);
    const width = Math.max(5, ...u.phases.map((p) => p.name.length + (p.source === 'control-plane' ? 16 : 0)));
    lines.push(`    ${'PHASE'.padEnd(width)}   ${'STARTED'.padEnd(20)}   DURATION`);
    for (const p of u.phases) {
      const name = p.source === 'control-plane' ? `${p.name} (control plane)` : p.name;
      const d = p.endedUnixMs ? duration(p.endedUnixMs - p.startedUnixMs) : u.endedUnixMs ? '<unfinished>' : `${duration(now - p.startedUnixMs)} so far`;
      lines.push(`    ${name.padEnd(width)}   ${clock(p.startedUnixMs).padEnd(20)}   ${d}`);
    }
    // Lifecycle hooks the update ran (or skipped on their `if`), in order.
    for (const h of u.hooks ?? []) {
      const outcome = h.result === 'skipped' ? 'skipped (its if matched no changed path)' : h.result === 'timeout' ? `killed at its timeout after ${duration(h.durationMs)}` : `exited ${h.exitStatus} after ${duration(h.durationMs)}`;
      lines.push(`    Hook:        ${h.point}[${h.index}] ${h.argv.join(' ')}: ${outcome}`);
    }
  }
  return lines.join('\n') + '\n';
}
