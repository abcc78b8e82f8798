// Runs the controllers one after another, never two passes at once, and coalesces bursts of
// changes (5,000 agents reporting Done within a second) into a few passes.

import type { Logger } from '../runtime/logger.ts';

export interface ReconcileStep {
  name: string;
  run(): Promise<void> | void;
}

const COALESCE_MS = 20;

export class ReconcileLoop {
  #scheduled: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  constructor(private readonly steps: ReconcileStep[], private readonly log: Logger) {}

  schedule(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#scheduled ??= setTimeout(() => {
      this.#scheduled = undefined;
      if (this.#running) this.#again = true;
      else void this.#start();
    }, COALESCE_MS);
  }

  /** Runs a pass now (after any pass in progress) and waits for it: start-up, tests, API writes. */
  async runNow(): Promise<void> {
    clearTimeout(this.#scheduled);
    this.#scheduled = undefined;
    while (this.#running) await this.#running;
    await this.#start();
  }

  /** The only place a pass starts, so two passes never overlap. */
  #start(): Promise<void> {
    this.#running = this.#run().finally(() => {
      this.#running = undefined;
      if (this.#again) {
        this.#again = false;
        this.schedule();
      }
    });
    return this.#running;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#scheduled);
    await this.#running;
  }

  async #run(): Promise<void> {
    for (const step of this.steps) {
      try {
        await step.run();
      } catch (err) {
        // A failing step must not stop the others or the loop; the next change retries it.
        this.log.error({ err, step: step.name }, 'reconcile step failed');
      }
    }
  }
}
