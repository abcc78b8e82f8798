// One factor for the waits of the test helpers (untilNode, eventually, SimulatedAgent.waitFor, the
// headless page's waitFor): a budget written for a quiet 2-core machine is a bound on work that
// takes longer when the machine is busy (a fresh clone's run beside other CPU work, load 6-9 on
// 2 cores, ran 500 agents' TLS handshakes out of their 40 s). The helpers multiply every budget
// they are given by it, so a wait still ends as soon as its state is there and fails only when
// the state has not come in the budget the machine's speed allows.
//
// MCPLANE_TEST_TIME_SCALE=<factor> sets it for a run; otherwise it is measured once, when the
// first helper is loaded: the 1-minute load average per core, from 1 (a quiet machine) to 4.
// A wait that asserts something does NOT happen waits the longer budget too: still correct, only
// slower on a busy machine.

import { availableParallelism, loadavg } from 'node:os';

function measured(): number {
  const set = process.env.MCPLANE_TEST_TIME_SCALE;
  if (set !== undefined && set !== '') {
    const n = Number(set);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`MCPLANE_TEST_TIME_SCALE=${set}: expected a positive number`);
    return n;
  }
  const perCore = loadavg()[0]! / availableParallelism();
  return Math.min(4, Math.max(1, Math.round(perCore * 10) / 10));
}

export const TIME_SCALE = measured();

/** A wait's budget on this machine now: `ms` on a quiet one. */
export function scaled(ms: number): number {
  return Math.round(ms * TIME_SCALE);
}
