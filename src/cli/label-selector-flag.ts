// `-l/--selector` as kubectl reads it ("role=worker,zone in (a,b),!legacy"), turned into the
// LabelSelector that src/machineconfig/label-selector.ts matches, so the CLI and the server
// agree on what a selector means.

import { ConfigurationError } from '../machineconfig/errors.ts';
import type { LabelSelector, LabelSelectorRequirement } from '../machineconfig/index.ts';

// Kubernetes' qualified name with an optional DNS-subdomain prefix, and label values.
const KEY = /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

export function parseSelectorFlag(text: string): LabelSelector {
  const fail = (why: string): never => {
    throw new ConfigurationError(`--selector "${text}": ${why} (expected e.g. "key=value,key!=value,key in (a,b),key,!key")`);
  };
  const requirements: LabelSelectorRequirement[] = [];
  for (const raw of splitTopLevel(text, fail)) {
    const term = raw.trim();
    if (!term) fail('empty requirement');
    let m: RegExpExecArray | null;
    const key = (k: string): string => (KEY.test(k) ? k : fail(`"${k}" is not a valid label key`));
    const value = (v: string): string => (VALUE.test(v) ? v : fail(`"${v}" is not a valid label value`));
    if ((m = /^(\S+?)\s+(in|notin)\s*\((.*)\)$/.exec(term))) {
      const values = m[3]!.split(',').map((v) => value(v.trim()));
      requirements.push({ key: key(m[1]!), operator: m[2] === 'in' ? 'In' : 'NotIn', values });
    } else if ((m = /^([^!=\s]+)\s*!=\s*(\S*)$/.exec(term))) {
      requirements.push({ key: key(m[1]!), operator: 'NotIn', values: [value(m[2]!)] });
    } else if ((m = /^([^!=\s]+)\s*==?\s*(\S*)$/.exec(term))) {
      requirements.push({ key: key(m[1]!), operator: 'In', values: [value(m[2]!)] });
    } else if ((m = /^!\s*(\S+)$/.exec(term))) {
      requirements.push({ key: key(m[1]!), operator: 'DoesNotExist' });
    } else if (!/\s/.test(term)) {
      requirements.push({ key: key(term), operator: 'Exists' });
    } else {
      fail(`cannot read "${term}"`);
    }
  }
  return { matchExpressions: requirements };
}

/** Splits at commas outside parentheses: "a in (x,y),b" is two requirements. */
function splitTopLevel(text: string, fail: (why: string) => never): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '(') depth++;
    else if (ch === ')' && --depth < 0) fail('unbalanced ")"');
    else if (ch === ',' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  if (depth !== 0) fail('unbalanced "("');
  parts.push(text.slice(start));
  return parts;
}
