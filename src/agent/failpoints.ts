// Fault injection for crash-safety tests, in the manner of etcd's failpoints:
// MCPLANE_FAILPOINT=<name>[:<n>] makes the agent SIGKILL itself when it reaches that point (the
// n-th time, counting from 0, for per-file points). Unset in production, where hit() is a no-op.

export class Failpoints {
  readonly #name: string | undefined;
  readonly #index: number | undefined;

  constructor(spec = process.env.MCPLANE_FAILPOINT) {
    if (!spec) return;
    const [name, index] = spec.split(':');
    this.#name = name;
    this.#index = index === undefined ? undefined : Number(index);
  }

  hit(name: string, index?: number): void {
    if (name !== this.#name) return;
    if (this.#index !== undefined && index !== this.#index) return;
    process.kill(process.pid, 'SIGKILL');
  }
}
