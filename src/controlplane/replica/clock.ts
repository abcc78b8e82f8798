// Where the control plane reads the time. Everything time-driven in a decision (maintenance
// windows, canary soaks, drain deadlines, condition transition times) reads this clock, so a test
// can move time instead of waiting for it. Timers (requeueAfterMs) still run on real time: a test
// that advances the clock asks the controllers to run again (ControlPlane.resync()).

export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock a test sets and advances by hand. */
export class ManualClock implements Clock {
  private ms: number;
  constructor(ms: number) {
    this.ms = ms;
  }
  now(): number {
    return this.ms;
  }
  set(ms: number): void {
    this.ms = ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}
