// A disruption budget per group of nodes (mcplane addition, as Flight Control's per-label budgets):
// besides the pool's maxUnavailable, at most `maxUnavailable` nodes of each group (the nodes that
// share the values of the `groupBy` labels, e.g. one rack or one site) may be unavailable at once,
// so a rollout never takes a whole rack down even when the pool's budget would allow it.

import { resolveMaxUnavailable } from './max-unavailable.ts';
import { join, type ProblemCollector } from './problem-collector.ts';
import type { DisruptionBudget, NodeRecord } from './types.ts';

const PERCENT = /^(\d+)%$/;

export function parseDisruptionBudget(raw: unknown, c: ProblemCollector, field: string): DisruptionBudget | undefined {
  const b = c.record(raw, field);
  if (!b) return undefined;
  c.onlyKeys(b, field, ['groupBy', 'maxUnavailable']);
  const groupBy = c.stringList(b.groupBy, field, 'groupBy');
  let ok = true;
  if (!groupBy || groupBy.length === 0) {
    c.add(join(field, 'groupBy'), 'required', 'a disruption budget needs at least one label key to group nodes by (e.g. topology.kubernetes.io/zone, or a rack label)');
    ok = false;
  } else if (groupBy.length > 10) {
    c.add(join(field, 'groupBy'), 'max-keys', `group by at most 10 label keys, got ${groupBy.length}`);
    ok = false;
  } else {
    groupBy.forEach((key, i) => {
      if (key.trim() === '') {
        c.add(`${join(field, 'groupBy')}[${i}]`, 'label-key', 'a label key must not be empty');
        ok = false;
      }
    });
  }
  const max = b.maxUnavailable;
  const valid = (typeof max === 'number' && Number.isInteger(max) && max >= 1) ||
    (typeof max === 'string' && PERCENT.test(max) && Number(PERCENT.exec(max)![1]) >= 1 && Number(PERCENT.exec(max)![1]) <= 100);
  if (!valid) {
    c.add(join(field, 'maxUnavailable'), 'max-unavailable', `the budget's maxUnavailable must be a whole number from 1 or a percentage from 1% to 100%, got ${max === undefined ? 'nothing' : JSON.stringify(max)}`);
    ok = false;
  }
  return ok ? { groupBy: groupBy!, maxUnavailable: max as number | string } : undefined;
}

/**
 * The group a node belongs to: its values of the groupBy labels joined with ",". A node without
 * one of the labels has "" in its place, so nodes missing every label share the group "".
 */
export function budgetGroupOf(budget: DisruptionBudget, node: Pick<NodeRecord, 'labels'>): string {
  return budget.groupBy.map((k) => node.labels[k] ?? '').join(',');
}

/** Counts per group, and how many each group may have unavailable. */
export class GroupBudget {
  readonly #limit = new Map<string, number>();
  readonly #used = new Map<string, number>();

  private readonly budget: DisruptionBudget;
  constructor(budget: DisruptionBudget, nodes: readonly NodeRecord[], isUnavailable: (n: NodeRecord) => boolean) {
    this.budget = budget;
    const sizes = new Map<string, number>();
    for (const n of nodes) {
      const g = budgetGroupOf(budget, n);
      sizes.set(g, (sizes.get(g) ?? 0) + 1);
      if (isUnavailable(n)) this.#used.set(g, (this.#used.get(g) ?? 0) + 1);
    }
    for (const [g, size] of sizes) this.#limit.set(g, resolveMaxUnavailable(budget.maxUnavailable, size));
  }

  /** Takes one unit of the node's group budget when there is one left. */
  take(node: NodeRecord): boolean {
    const g = budgetGroupOf(this.budget, node);
    const used = this.#used.get(g) ?? 0;
    if (used >= (this.#limit.get(g) ?? 1)) return false;
    this.#used.set(g, used + 1);
    return true;
  }
}
