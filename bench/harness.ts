// Small helpers shared by the benchmarks: median-of-N timing and a fixed output format, so every
// script prints figures and a ratio against a baseline measured in the same run.

import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * A full collection, run between compareMedian's timed calls. Without it the collector's work
 * for one call's garbage (concurrent marking and sweeping run on other threads, which
 * process.cpuUsage counts) lands in whichever call is timed next: the render bench's floor,
 * JSON.parse + stringify, measured 27-34 ms beside a render it had measured 8-11 ms beside
 * before the render allocated less, and the ratio read 0.55x.
 */
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

export function timeMedian(runs: number, fn: () => void): number {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    fn();
    samples.push(performance.now() - start);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)]!;
}

/**
 * Times a baseline and a candidate alternately, so that load from other tenants of a shared
 * machine hits both alike, and returns each one's median wall-clock time and median CPU time
 * (this process's, GC threads included). On a busy machine wall clock counts the time the
 * process waited for a core; CPU time does not, so its ratio is the steadier of the two. Each
 * call starts on a collected heap, so it pays for the collections its own allocation triggers,
 * not for its neighbour's garbage.
 */
export function compareMedian(runs: number, baseline: () => void, candidate: () => void): { baseline: number; candidate: number; baselineCpu: number; candidateCpu: number } {
  const b: number[] = [];
  const c: number[] = [];
  const bCpu: number[] = [];
  const cCpu: number[] = [];
  const cpuMs = (): number => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  for (let i = 0; i < runs; i++) {
    collectGarbage();
    let start = performance.now();
    let cpu = cpuMs();
    baseline();
    b.push(performance.now() - start);
    bCpu.push(cpuMs() - cpu);
    collectGarbage();
    start = performance.now();
    cpu = cpuMs();
    candidate();
    c.push(performance.now() - start);
    cCpu.push(cpuMs() - cpu);
  }
  return { baseline: median(b), candidate: median(c), baselineCpu: median(bCpu), candidateCpu: median(cCpu) };
}

function median(samples: number[]): number {
  const sorted = [...samples].sort((x, y) => x - y);
  return sorted[Math.floor(sorted.length / 2)]!;
}

export async function timeMedianAsync(runs: number, fn: () => Promise<void>): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    await fn();
    samples.push(performance.now() - start);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)]!;
}

export function report(title: string, rows: [string, string][], verdict?: { ratio: number; goal: string; ok: boolean }): void {
  console.log(`\n== ${title}`);
  const width = Math.max(...rows.map(([k]) => k.length));
  for (const [k, v] of rows) console.log(`  ${k.padEnd(width)}  ${v}`);
  if (verdict) console.log(`  ratio ${verdict.ratio.toFixed(2)} (goal ${verdict.goal}): ${verdict.ok ? 'MET' : 'NOT MET'}`);
}

export const ms = (n: number): string => `${n.toFixed(2)} ms`;

/** A process's resident set size in KiB, from /proc. */
export function rssKiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
}
