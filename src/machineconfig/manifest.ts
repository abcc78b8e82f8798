// Reading manifests the way Kubernetes does: YAML 1.1 (so `mode: 0644` is octal 420, not decimal
// 644), several documents per text, JSON too, and `kind: List` wrappers as `oc get -o yaml` prints.

import { LineCounter, parseAllDocuments } from 'yaml';
import { KIND_MACHINE_CONFIG, KIND_MACHINE_CONFIG_POOL, KIND_MACHINE_CONFIGURATION } from './constants.ts';
import { applyBudget } from './contents-budget.ts';
import type { Problem } from './errors.ts';
import { parseMachineConfig } from './machine-config.ts';
import { parseMachineConfigPool } from './machine-config-pool.ts';
import { checkYamlDocument, checkYamlTokens, YamlBudget } from './yaml-expansion.ts';
import { parseMachineConfiguration } from './machine-configuration.ts';
import { isSourceKind, parseSourceObject, SOURCE_KINDS, UNIMPLEMENTED_MCO_KINDS, type SourceObject } from './generated-configs.ts';
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
  /** KubeletConfigs, ContainerRuntimeConfigs, Image/cluster and the mirror sets (generated-configs.ts). */
  sources: SourceObject[];
  problems: Problem[];
  /** What the valid documents hold that is most likely not meant (ProblemCollector.warnings). */
  warnings: string[];
}

/**
 * Splits a text into documents. Syntax errors are problems, not exceptions. The texts of one
 * request share one `budget`, which bounds what their YAML may cost (see yaml-expansion.ts).
 */
export function readDocuments(text: string, sourceName = '', budget = new YamlBudget()): { documents: RawDocument[]; problems: Problem[] } {
  const documents: RawDocument[] = [];
  const problems: Problem[] = [];
  const values = parseText(text, sourceName, problems, budget);
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

/** Syntax errors reported per document. */
const MAX_SYNTAX_PROBLEMS = 20;

function parseText(text: string, sourceName: string, problems: Problem[], budget: YamlBudget): unknown[] {
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
    // JSON is a subset of YAML, but JSON.parse is much faster on large inputs; fall back to the
    // YAML reader (which then reports a precise syntax error) only when it fails. JSON has no
    // aliases, and JSON.parse costs no more than the bytes the gRPC receive limit lets in.
    try {
      const value: unknown = JSON.parse(text);
      return Array.isArray(value) ? value : [value];
    } catch { /* fall through */ }
  }
  // A request that already broke a limit was told so once; its other texts are not read at all.
  if (budget.exceeded) return [];
  const tooLong = checkYamlTokens(text, sourceName, budget);
  if (tooLong) {
    problems.push(tooLong);
    return [];
  }
  const out: unknown[] = [];
  // uniqueKeys is checked by checkYamlDocument: the library's check is quadratic in a mapping's
  // keys. prettyErrors is off for the same reason (it copies the source line for every error);
  // the position is added from the line counter instead.
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(text, { version: '1.1', merge: true, uniqueKeys: false, prettyErrors: false, lineCounter });
  docs.forEach((doc, i) => {
    if (budget.exceeded) return;
    const source = `${sourceName}#${i}`;
    if ('errors' in doc && doc.errors.length > 0) {
      // The first errors say what is wrong; a hundred thousand of them would only cost memory.
      for (const err of doc.errors.slice(0, MAX_SYNTAX_PROBLEMS)) {
        const { line, col } = lineCounter.linePos(err.pos[0]);
        problems.push({ source, object: 'document', field: '', rule: 'yaml-syntax', message: `${err.message.split('\n')[0]!} at line ${line}, column ${col}` });
      }
      if (doc.errors.length > MAX_SYNTAX_PROBLEMS) {
        problems.push({ source, object: 'document', field: '', rule: 'yaml-syntax', message: `… and ${doc.errors.length - MAX_SYNTAX_PROBLEMS} more syntax errors` });
      }
      return;
    }
    const refused = checkYamlDocument(doc, source, lineCounter, budget);
    if (refused.length) {
      problems.push(...refused);
      return;
    }
    try {
      // Aliases are bounded above, in O(nodes); the library's own alias heuristic costs a walk of
      // the document for each alias inside an anchored node, so it is switched off (-1).
      out.push(doc.toJS({ maxAliasCount: -1 }));
    } catch (err) {
      problems.push({ source, object: 'document', field: '', rule: 'yaml-syntax', message: (err as Error).message });
    }
  });
  return out;
}

/** Validates raw documents as MachineConfigs, MachineConfigPools and MachineConfiguration/cluster, collecting every problem. */
export function parseDocuments(documents: RawDocument[]): ParsedManifests {
  const out: ParsedManifests = { configs: [], pools: [], machineConfigurations: [], sources: [], problems: [], warnings: [] };
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
    } else if (isSourceKind(value.kind)) {
      const source = parseSourceObject(value, c);
      if (source && c.ok) out.sources.push(source);
    } else if (typeof value.kind === 'string' && Object.hasOwn(UNIMPLEMENTED_MCO_KINDS, value.kind)) {
      c.add('kind', 'kind-not-implemented', UNIMPLEMENTED_MCO_KINDS[value.kind]!);
    } else {
      c.add('kind', 'unknown-kind', `kind ${JSON.stringify(value.kind ?? null)} is not ${KIND_MACHINE_CONFIG}, ${KIND_MACHINE_CONFIG_POOL}, ${KIND_MACHINE_CONFIGURATION} or one of ${SOURCE_KINDS.join(', ')}`);
    }
    out.problems.push(...c.problems);
    if (c.ok) out.warnings.push(...c.warnings);
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
