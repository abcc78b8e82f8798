// Kubernetes label selectors (metav1.LabelSelector): matchLabels and matchExpressions, ANDed.

import { join, type ProblemCollector } from './problem-collector.ts';
import { parseStringMap } from './object-meta.ts';
import type { LabelSelector, LabelSelectorRequirement, Labels, SelectorOperator } from './types.ts';

const OPERATORS: readonly SelectorOperator[] = ['In', 'NotIn', 'Exists', 'DoesNotExist'];

export function parseLabelSelector(raw: unknown, c: ProblemCollector, field: string): LabelSelector | null {
  const sel = c.record(raw, field);
  if (!sel) return null;
  c.onlyKeys(sel, field, ['matchLabels', 'matchExpressions']);
  const out: LabelSelector = {};
  const matchLabels = parseStringMap(sel.matchLabels, c, join(field, 'matchLabels'));
  if (matchLabels) out.matchLabels = matchLabels;
  const exprs = c.array(sel.matchExpressions, field, 'matchExpressions');
  if (exprs) {
    out.matchExpressions = [];
    exprs.forEach((rawExpr, i) => {
      const f = `${field}.matchExpressions[${i}]`;
      const expr = c.record(rawExpr, f);
      if (!expr) return;
      const req = parseRequirement(expr, c, f);
      if (req) out.matchExpressions!.push(req);
    });
  }
  return out;
}

function parseRequirement(expr: Record<string, unknown>, c: ProblemCollector, f: string): LabelSelectorRequirement | undefined {
  c.onlyKeys(expr, f, ['key', 'operator', 'values']);
  const key = c.string(expr.key, f, 'key');
  if (!key) c.add(join(f, 'key'), 'required', 'a selector expression needs a key');
  const operator = c.string(expr.operator, f, 'operator');
  if (!operator || !OPERATORS.includes(operator as SelectorOperator)) {
    c.add(join(f, 'operator'), 'selector-operator', `operator "${operator ?? ''}" is not one of ${OPERATORS.join(', ')}`);
    return undefined;
  }
  const values = c.stringList(expr.values, f, 'values') ?? [];
  if ((operator === 'In' || operator === 'NotIn') && values.length === 0) {
    c.add(join(f, 'values'), 'selector-values', `operator ${operator} needs at least one value`);
  }
  if ((operator === 'Exists' || operator === 'DoesNotExist') && values.length > 0) {
    c.add(join(f, 'values'), 'selector-values', `operator ${operator} takes no values`);
  }
  if (!key) return undefined;
  const req: LabelSelectorRequirement = { key, operator: operator as SelectorOperator };
  if (values.length) req.values = values;
  return req;
}

export function isEmptySelector(sel: LabelSelector | null): boolean {
  return !sel || (Object.keys(sel.matchLabels ?? {}).length === 0 && (sel.matchExpressions ?? []).length === 0);
}

/**
 * Whether `labels` satisfy `sel`. A null selector matches nothing; an empty one matches
 * everything (Kubernetes' LabelSelectorAsSelector). Pools' node selectors add their own rule on
 * top: see pool-membership.ts.
 */
export function matchesSelector(sel: LabelSelector | null, labels: Labels | undefined): boolean {
  if (!sel) return false;
  const l = labels ?? {};
  // Object.keys, not Object.entries: a render asks this for every MachineConfig.
  const matchLabels = sel.matchLabels ?? {};
  for (const k of Object.keys(matchLabels)) {
    if (l[k] !== matchLabels[k]) return false;
  }
  for (const req of sel.matchExpressions ?? []) {
    const has = Object.prototype.hasOwnProperty.call(l, req.key);
    const value = l[req.key];
    switch (req.operator) {
      case 'In': if (!has || !req.values!.includes(value!)) return false; break;
      case 'NotIn': if (has && req.values!.includes(value!)) return false; break;
      case 'Exists': if (!has) return false; break;
      case 'DoesNotExist': if (has) return false; break;
    }
  }
  return true;
}

export function formatSelector(sel: LabelSelector | null): string {
  if (!sel) return '<none>';
  const parts = Object.entries(sel.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const r of sel.matchExpressions ?? []) {
    if (r.operator === 'Exists') parts.push(r.key);
    else if (r.operator === 'DoesNotExist') parts.push(`!${r.key}`);
    else parts.push(`${r.key} ${r.operator === 'In' ? 'in' : 'notin'} (${r.values!.join(',')})`);
  }
  return parts.join(',') || '<everything>';
}

