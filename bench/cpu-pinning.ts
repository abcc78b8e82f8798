// Keeps the simulator and the system under test off each other's CPU. On a 2-core machine the
// simulated agents, the replicas and etcd all compete for the same two cores, so a wall-clock
// figure moves with how busy the simulator happened to be: the fan-out of one commit cannot be
// told from another's. With pinning the simulator (the agent swarm and the status readers) runs
// on CPU 0 and the control plane (servers and etcd members) on the others, and every process's
// CPU time is its own: the per-unit CPU figures the bench prints are comparable across runs.
//
// taskset -a sets every thread a process has now; threads started later (the status thread, the
// etcd lease thread) inherit the affinity of the thread that starts them. BENCH_PIN=0 turns it
// off (a machine without taskset, or to see the unpinned figures).

import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';

export interface CpuPlan {
  /** Whether processes are pinned at all (2 or more CPUs, taskset present, not BENCH_PIN=0). */
  readonly enabled: boolean;
  /** taskset's CPU list for each side, e.g. "0" and "1" or "1-7". */
  readonly simulator: string;
  readonly controlPlane: string;
  /** One line for the report: where each side runs, or why nothing is pinned. */
  readonly description: string;
}

function plan(): CpuPlan {
  const cpus = availableParallelism();
  const off = (why: string): CpuPlan => ({ enabled: false, simulator: '', controlPlane: '', description: `not pinned (${why}): figures include the simulator's competition for CPU` });
  if (process.env.BENCH_PIN === '0') return off('BENCH_PIN=0');
  if (cpus < 2) return off('one CPU');
  if (spawnSync('taskset', ['-V']).status !== 0) return off('no taskset: apt-get install util-linux');
  const controlPlane = cpus === 2 ? '1' : `1-${cpus - 1}`;
  return { enabled: true, simulator: '0', controlPlane, description: `simulator on CPU 0, control plane and etcd on CPU ${controlPlane} (taskset)` };
}

export const CPU_PLAN: CpuPlan = plan();

function pin(pids: readonly number[], cpus: string): void {
  if (!CPU_PLAN.enabled) return;
  for (const pid of pids) {
    const r = spawnSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { encoding: 'utf8' });
    // A process that exited in between is not the bench's failure; anything else is.
    if (r.status !== 0 && !/No such process|failed to get pid/.test(r.stderr)) throw new Error(`taskset -a -p -c ${cpus} ${pid}: ${r.stderr.trim()}`);
  }
}

export const pinSimulator = (pids: readonly number[]): void => pin(pids, CPU_PLAN.simulator);
export const pinControlPlane = (pids: readonly number[]): void => pin(pids, CPU_PLAN.controlPlane);

/** The bench process itself (it times and reads) goes with the simulator. */
export function pinSelf(): void {
  pinSimulator([process.pid]);
}
