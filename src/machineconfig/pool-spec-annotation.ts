// mcplane's own MachineConfigPool fields carried in an annotation, for pools that live in a
// Kubernetes cluster (--kubernetes-source, mcctl import). MCO's MachineConfigPool CRD has a
// structural schema, so the API server prunes every spec field it does not know: windows,
// budgets, canaries and the rest would vanish on `oc apply`. An annotation is kept as written,
// and the same annotation works in a file given to mcctl apply.

import { parse } from 'yaml';
import type { ProblemCollector } from './problem-collector.ts';

export const POOL_SPEC_ANNOTATION = 'mcplane.io/pool-spec';
/** The spec fields mcplane adds to MCO's MachineConfigPool: the ones the annotation may carry. */
export const MCPLANE_POOL_FIELDS = [
  'disruptionPolicy', 'driftPolicy', 'drain', 'maintenanceWindows', 'maintenanceWindowScope', 'downloadWindows', 'disruptionBudget', 'rollout', 'healthCheck', 'hooks',
] as const;
const FIELD = `metadata.annotations[${POOL_SPEC_ANNOTATION}]`;

/**
 * The spec with the annotation's fields laid in, and where each came from; problems with the
 * annotation itself (not YAML, not an object, one of MCO's fields, a field set in both places)
 * are added to `c`.
 */
export function withPoolSpecAnnotation(metadata: unknown, rawSpec: Record<string, unknown>, c: ProblemCollector): { spec: Record<string, unknown>; fromAnnotation: ReadonlySet<string> } {
  const text = (metadata as { annotations?: Record<string, unknown> } | null | undefined)?.annotations?.[POOL_SPEC_ANNOTATION];
  if (typeof text !== 'string') return { spec: rawSpec, fromAnnotation: new Set() };
  let value: unknown;
  try {
    // As manifests are read (YAML 1.1, so `on`/`yes` mean what they mean in a file too); no aliases.
    value = parse(text, { version: '1.1', merge: true, uniqueKeys: true, maxAliasCount: 0 });
  } catch (err) {
    c.add(FIELD, 'pool-spec-annotation', `is not YAML or JSON: ${(err as Error).message.split('\n')[0]}`);
    return { spec: rawSpec, fromAnnotation: new Set() };
  }
  // A plain mapping only: `!!binary`, `!!set` and the like make Buffers and Sets.
  if (value === null || typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) {
    c.add(FIELD, 'pool-spec-annotation', `must be an object of mcplane's pool fields (${MCPLANE_POOL_FIELDS.join(', ')})`);
    return { spec: rawSpec, fromAnnotation: new Set() };
  }
  const spec = { ...rawSpec };
  const fromAnnotation = new Set<string>();
  for (const [key, v] of Object.entries(value)) {
    if (!(MCPLANE_POOL_FIELDS as readonly string[]).includes(key)) {
      c.add(`${FIELD}.${key}`, 'pool-spec-annotation', `"${key}" is not one of mcplane's pool fields (${MCPLANE_POOL_FIELDS.join(', ')}); MCO's own fields go in spec`);
    } else if (rawSpec[key] !== undefined) {
      c.add(`${FIELD}.${key}`, 'pool-spec-annotation', `"${key}" is set both in spec and in the annotation; keep one`);
    } else {
      spec[key] = v;
      fromAnnotation.add(key);
    }
  }
  return { spec, fromAnnotation };
}

/** Problems about a field that came from the annotation name the annotation, not spec. */
export function nameAnnotationFields(c: ProblemCollector, since: number, fromAnnotation: ReadonlySet<string>): void {
  for (let i = since; i < c.problems.length; i++) {
    const p = c.problems[i]!;
    const m = /^spec\.([A-Za-z]+)(.*)$/.exec(p.field);
    if (m && fromAnnotation.has(m[1]!)) p.field = `${FIELD}.${m[1]}${m[2]}`;
  }
}
