// Fault injection for crash-safety tests, in the manner of etcd's failpoints:
// MCPLANE_FAILPOINT=<name>[:<n>] makes the agent SIGKILL itself when it reaches that point (the
// n-th time, counting from 0, for per-file points). Unset in production, where hit() is a no-op.
// The names come from the update's step table: a misspelt one is refused at start rather than
// never firing, which would pass a crash test without any crash.

import { ConfigurationError } from '../machineconfig/index.ts';
import { FAILPOINTS, type Failpoint } from './update-steps.ts';

export class Failpoints {
  readonly #name: Failpoint | undefined;
  readonly #index: number | undefined;

  constructor(spec = process.env.MCPLANE_FAILPOINT) {
    if (!spec) return;
    const [name, index] = spec.split(':');
    if (!FAILPOINTS.includes(name as Failpoint)) {
      throw new ConfigurationError(`MCPLANE_FAILPOINT: "${name}" is not a failpoint; the failpoints are ${FAILPOINTS.join(', ')}`);
    }
    if (index !== undefined && !/^\d+$/.test(index)) throw new ConfigurationError(`MCPLANE_FAILPOINT: "${index}" after the colon must be a count from 0`);
    this.#name = name as Failpoint;
    this.#index = index === undefined ? undefined : Number(index);
  }

  hit(name: Failpoint, index?: number): void {
    if (name !== this.#name) return;
    if (this.#index !== undefined && index !== this.#index) return;
    process.kill(process.pid, 'SIGKILL');
  }
}
