// Label and field selectors as the apiserver reads them: the query-string forms
// (`labelSelector=app=web,tier!=db,zone in (a,b),!legacy`, `fieldSelector=spec.nodeName=n1`)
// and the LabelSelector object a PodDisruptionBudget carries (matchLabels, matchExpressions).

import { apiErrors } from './api-status.ts';

type Labels = Record<string, string> | undefined;
type Requirement = (labels: Record<string, string>) => boolean;

/** Parses a labelSelector query parameter; a malformed one is a 400 as on the real server. */
export function parseLabelSelector(text: string): (labels: Labels) => boolean {
  const requirements: Requirement[] = [];
  for (const part of splitTopLevel(text)) {
    const term = part.trim();
    if (!term) continue;
    let m: RegExpExecArray | null;
    if ((m = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term))) {
      const [, key, op, list] = m as unknown as [string, string, string, string];
      const values = new Set(list.split(',').map((v) => v.trim()).filter(Boolean));
      requirements.push(op === 'in' ? (l) => key in l && values.has(l[key]!) : (l) => !(key in l) || !values.has(l[key]!));
    } else if ((m = /^([\w./-]+)\s*(!=|==|=)\s*([\w.-]*)$/.exec(term))) {
      const [, key, op, value] = m as unknown as [string, string, string, string];
      requirements.push(op === '!=' ? (l) => l[key] !== value : (l) => l[key] === value);
    } else if ((m = /^!([\w./-]+)$/.exec(term))) {
      const key = m[1]!;
      requirements.push((l) => !(key in l));
    } else if ((m = /^([\w./-]+)$/.exec(term))) {
      const key = m[1]!;
      requirements.push((l) => key in l);
    } else {
      throw apiErrors.badRequest(`unable to parse requirement: ${term}`);
    }
  }
  return (labels) => requirements.every((r) => r(labels ?? {}));
}

/** Commas inside `in (a,b)` do not separate requirements. */
function splitTopLevel(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')') depth--;
    else if (text[i] === ',' && depth === 0) {
      out.push(text.slice(start, i));
      start = i + 1;
    }
  }
  out.push(text.slice(start));
  return out;
}

/** The fields the apiserver lets each resource be selected by that mcplane uses. */
const FIELDS: Record<string, (obj: Record<string, any>) => string | undefined> = {
  'metadata.name': (o) => o.metadata?.name,
  'metadata.namespace': (o) => o.metadata?.namespace ?? '',
  'spec.nodeName': (o) => o.spec?.nodeName ?? '',
  'status.phase': (o) => o.status?.phase ?? '',
  'spec.unschedulable': (o) => String(Boolean(o.spec?.unschedulable)),
  'involvedObject.name': (o) => o.involvedObject?.name ?? '',
  'involvedObject.kind': (o) => o.involvedObject?.kind ?? '',
  'involvedObject.uid': (o) => o.involvedObject?.uid ?? '',
  'reason': (o) => o.reason ?? '',
};

export function parseFieldSelector(text: string): (obj: Record<string, any>) => boolean {
  const terms = text.split(',').map((t) => t.trim()).filter(Boolean).map((term) => {
    const m = /^([\w.]+)\s*(!=|==|=)\s*(.*)$/.exec(term);
    if (!m) throw apiErrors.badRequest(`invalid selector: '${text}'; can't understand '${term}'`);
    const [, field, op, value] = m as unknown as [string, string, string, string];
    const read = FIELDS[field];
    if (!read) throw apiErrors.badRequest(`field label not supported: ${field}`);
    return (o: Record<string, any>) => (op === '!=' ? read(o) !== value : read(o) === value);
  });
  return (o) => terms.every((t) => t(o));
}

export interface LabelSelectorObject {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }[];
}

/**
 * metav1.LabelSelectorAsSelector: an empty selector (`{}`) matches everything, which is how a
 * policy/v1 PodDisruptionBudget's empty selector is read; a missing one matches nothing.
 */
export function matchesLabelSelector(selector: LabelSelectorObject | undefined | null, labels: Labels): boolean {
  if (!selector) return false;
  const l = labels ?? {};
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (l[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const values = e.values ?? [];
    const ok = e.operator === 'In' ? e.key in l && values.includes(l[e.key]!)
      : e.operator === 'NotIn' ? !(e.key in l) || !values.includes(l[e.key]!)
      : e.operator === 'Exists' ? e.key in l
      : !(e.key in l);
    if (!ok) return false;
  }
  return true;
}
