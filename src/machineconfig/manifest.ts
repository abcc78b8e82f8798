// Reading manifests the way Kubernetes does: YAML 1.1 (so `mode: 0644` is octal 420, not decimal
// 644), several documents per text, JSON too, and `kind: List` wrappers as `oc get -o yaml` prints.

import { parseAllDocuments } from 'yaml';
import { KIND_MACHINE_CONFIG, KIND_MACHINE_CONFIG_POOL, KIND_MACHINE_CONFIGURATION } from './constants.ts';
import { applyBudget } from './contents-budget.ts';
import type { Problem } from './errors.ts';
import { parseMachineConfig } from './machine-config.ts';
import { parseMachineConfigPool } from './machine-config-pool.ts';
import { parseMachineConfiguration } from './machine-configuration.ts';
import { objectRef } from './object-meta.ts';
import { isRecord, ProblemCollector } from './problem-collector.ts';
import type { MachineConfig, MachineConfigPool, MachineConfiguration } from './types.ts';

export interface RawDocument {
  /** "file#index", or "#index" for text that came without a file name. */
  source: string;
  value: Record<string, unknown>;
}

export interface ParsedManifests {
  configs: MachineConfig[];
  pools: MachineConfigPool[];
  /** MachineConfiguration/cluster (the cluster-wide disruption policy); at most one. */
  machineConfigurations: MachineConfiguration[];
  problems: Problem[];
}

/** Splits a text into documents. Syntax errors are problems, not exceptions. */
export function readDocuments(text: string, sourceName = ''): { documents: RawDocument[]; problems: Problem[] } {
  const documents: RawDocument[] = [];
  const problems: Problem[] = [];
  const values = parseText(text, sourceName, problems);
  let index = 0;
  const push = (value: unknown): void => {
    const source = `${sourceName}#${index++}`;
    if (value === null || value === undefined) return; // an empty document between `---` separators
    if (!isRecord(value)) {
      problems.push({ source, object: 'document', field: '', rule: 'document-type', message: 'a manifest must be a mapping with apiVersion, kind, metadata and spec' });
      return;
    }
    if (value.kind === 'List' && Array.isArray(value.items)) {
      for (const item of value.items) push(item);
      return;
    }
    documents.push({ source, value });
  };
  for (const value of values) push(value);
  return { documents, problems };
}

function parseText(text: string, sourceName: string, problems: Problem[]): unknown[] {
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
    // JSON is a subset of YAML, but JSON.parse is much faster on large inputs; fall back to the
    // YAML reader (which then reports a precise syntax error) only when it fails.
    try {
      const value: unknown = JSON.parse(text);
      return Array.isArray(value) ? value : [value];
    } catch { /* fall through */ }
  }
  const out: unknown[] = [];
  parseAllDocuments(text, { version: '1.1', merge: true, uniqueKeys: true }).forEach((doc, i) => {
    if ('errors' in doc && doc.errors.length > 0) {
      for (const err of doc.errors) {
        problems.push({ source: `${sourceName}#${i}`, object: 'document', field: '', rule: 'yaml-syntax', message: err.message.split('\n')[0]! });
      }
      return;
    }
    try {
      out.push(doc.toJS({ maxAliasCount: 100 }));
    } catch (err) {
      problems.push({ source: `${sourceName}#${i}`, object: 'document', field: '', rule: 'yaml-syntax', message: (err as Error).message });
    }
  });
  return out;
}

/** Validates raw documents as MachineConfigs, MachineConfigPools and MachineConfiguration/cluster, collecting every problem. */
export function parseDocuments(documents: RawDocument[]): ParsedManifests {
  const out: ParsedManifests = { configs: [], pools: [], machineConfigurations: [], problems: [] };
  const seen = new Map<string, string>();
  const budget = applyBudget();
  for (const { source, value } of documents) {
    const ref = objectRef(value, 'document');
    const c = new ProblemCollector(ref, source);
    const previous = seen.get(ref);
    if (previous !== undefined) {
      c.add('metadata.name', 'duplicate-object', `${ref} is also defined at ${previous}; each object may appear once per apply`);
    }
    seen.set(ref, source);
    if (value.kind === KIND_MACHINE_CONFIG) {
      const mc = parseMachineConfig(value, c, budget);
      if (mc && c.ok) out.configs.push(mc);
    } else if (value.kind === KIND_MACHINE_CONFIG_POOL) {
      const pool = parseMachineConfigPool(value, c);
      if (pool && c.ok) out.pools.push(pool);
    } else if (value.kind === KIND_MACHINE_CONFIGURATION) {
      const mcfg = parseMachineConfiguration(value, c);
      if (mcfg && c.ok) out.machineConfigurations.push(mcfg);
    } else {
      c.add('kind', 'unknown-kind', `kind ${JSON.stringify(value.kind ?? null)} is not ${KIND_MACHINE_CONFIG}, ${KIND_MACHINE_CONFIG_POOL} or ${KIND_MACHINE_CONFIGURATION}`);
    }
    out.problems.push(...c.problems);
  }
  return out;
}

/** readDocuments + parseDocuments for one text. */
export function parseManifests(text: string, sourceName = ''): ParsedManifests {
  const { documents, problems } = readDocuments(text, sourceName);
  const parsed = parseDocuments(documents);
  parsed.problems.unshift(...problems);
  return parsed;
}
