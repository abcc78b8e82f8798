// maxUnavailable as a count: shared by the pool's budget and the per-group budgets, which read
// their own maxUnavailable by the same rule.

const PERCENT = /^(\d+)%$/;

/**
 * How many nodes of `machineCount` may be updating at once: an integer as given, a percentage
 * rounded down, and at least 1 either way (MCO's rule, so a rollout always makes progress).
 */
export function resolveMaxUnavailable(value: number | string, machineCount: number): number {
  const n = typeof value === 'number' ? value : Math.floor((Number(PERCENT.exec(value)?.[1] ?? 0) * machineCount) / 100);
  return Math.max(1, n);
}
