// driftPolicy Reconcile, bounded per file: a process that rewrites a managed file in a loop must
// not make the agent rewrite it in a loop too (each rewrite is a forced re-apply: files written,
// units restarted). Each drifted path remembers when the agent last rewrote it; the next rewrite
// of that path waits twice as long as the one before, and a path rewritten maxRewrites times
// within the window is given up on: the node is Degraded, naming the path and that it keeps
// changing. Rewrites older than the window are forgotten, so a file edited by hand now and then
// is always put back at once.

export interface ReconcileLimits {
  maxRewrites: number;
  backoffMs: number;
  windowMs: number;
}

export type ReconcileDecision =
  | { action: 'rewrite'; cause: string }
  | { action: 'wait'; waitMs: number; paths: string[] }
  | { action: 'give-up'; reason: string; paths: string[] };

export class DriftReconciler {
  /** Per path, the times the agent rewrote it within the window, oldest first. */
  #rewrites = new Map<string, number[]>();

  private readonly limits: ReconcileLimits;
  constructor(limits: ReconcileLimits) {
    this.limits = limits;
  }

  /** What to do about `paths` drifting now; a rewrite is counted against each of them. */
  decide(paths: readonly string[], now = Date.now()): ReconcileDecision {
    const recent = (path: string): number[] => (this.#rewrites.get(path) ?? []).filter((t) => t > now - this.limits.windowMs);
    const spent = paths.filter((p) => recent(p).length >= this.limits.maxRewrites);
    if (spent.length) {
      const describe = spent.map((p) => {
        const times = recent(p);
        return `${p} keeps changing: rewritten ${times.length} times in ${Math.max(1, Math.round((now - times[0]!) / 1000))}s and changed again after each`;
      });
      return {
        action: 'give-up',
        paths: spent,
        reason: `drift: ${describe.join('; ')}; driftPolicy Reconcile stopped rewriting (at most ${this.limits.maxRewrites} rewrites per file in ${Math.round(this.limits.windowMs / 1000)}s): ` +
          'stop whatever writes it, or list it in the pool\'s spec.driftIgnore; mcctl node reapply rewrites it again',
        };
    }
    let waitMs = 0;
    for (const p of paths) {
      const times = recent(p);
      if (times.length === 0) continue;
      const due = times.at(-1)! + this.limits.backoffMs * 2 ** (times.length - 1);
      waitMs = Math.max(waitMs, due - now);
    }
    if (waitMs > 0) return { action: 'wait', waitMs, paths: [...paths] };
    const counts: string[] = [];
    for (const p of paths) {
      const times = [...recent(p), now];
      this.#rewrites.set(p, times);
      counts.push(`${p} (rewrite ${times.length} of at most ${this.limits.maxRewrites} in ${Math.round(this.limits.windowMs / 1000)}s)`);
    }
    return { action: 'rewrite', cause: `drift: driftPolicy Reconcile rewrote ${counts.join(', ')}` };
  }

  /** A new config, or an operator's re-apply: every path starts afresh. */
  reset(): void {
    this.#rewrites.clear();
  }
}
