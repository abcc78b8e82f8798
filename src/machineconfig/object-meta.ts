import { API_VERSION } from './constants.ts';
import { isDnsSubdomain } from './node-name.ts';
import { isRecord, join, type ProblemCollector } from './problem-collector.ts';
import type { Labels, ObjectMeta } from './types.ts';

/** The "Kind/name" used in every problem, readable even when the name itself is invalid. */
export function objectRef(doc: unknown, fallbackKind = 'Object'): string {
  const kind = isRecord(doc) && typeof doc.kind === 'string' ? doc.kind : fallbackKind;
  const meta = isRecord(doc) && isRecord(doc.metadata) ? doc.metadata : undefined;
  const name = meta && typeof meta.name === 'string' && meta.name ? meta.name : '<unnamed>';
  return `${kind}/${name}`;
}

export function checkApiVersion(doc: Record<string, unknown>, c: ProblemCollector): void {
  if (doc.apiVersion !== API_VERSION) {
    c.add('apiVersion', 'api-version', `apiVersion must be "${API_VERSION}", got ${JSON.stringify(doc.apiVersion ?? null)}`);
  }
}

/** Validates metadata; unknown metadata fields (uid, creationTimestamp, ...) are ignored, so an
 * object exported from a cluster with `oc get -o yaml` loads unmodified. */
export function parseObjectMeta(raw: unknown, c: ProblemCollector): ObjectMeta | undefined {
  const meta = c.record(raw, 'metadata');
  if (!meta) {
    c.add('metadata', 'required', 'metadata with a name is required');
    return undefined;
  }
  const name = c.string(meta.name, 'metadata.name');
  if (!name) {
    c.add('metadata.name', 'required', 'a name is required');
  } else if (!isDnsSubdomain(name)) {
    // The API server's rule for these kinds' names (an RFC 1123 subdomain), so that what mcplane
    // stores can also be written to a cluster, and "a..b" is not a second spelling of a name.
    c.add('metadata.name', 'name-format',
      `"${name}" is not a valid name: dot-separated labels of lowercase letters, digits and "-", each starting and ending with a letter or digit, at most 253 characters`);
  }
  const labels = parseStringMap(meta.labels, c, 'metadata.labels');
  const annotations = parseStringMap(meta.annotations, c, 'metadata.annotations');
  if (!name) return undefined;
  const out: ObjectMeta = { name };
  if (labels) out.labels = labels;
  if (annotations) out.annotations = annotations;
  return out;
}

export function parseStringMap(raw: unknown, c: ProblemCollector, field: string): Labels | undefined {
  const map = c.record(raw, field);
  if (!map) return undefined;
  const out: Labels = {};
  // Object.keys rather than Object.entries: one array per map, not one more per label.
  for (const key of Object.keys(map)) {
    const value = map[key];
    // YAML reads `key: ""` as a string but `key:` as null; Kubernetes treats both as "".
    if (value === null) out[key] = '';
    else if (typeof value === 'string') out[key] = value;
    else c.add(join(field, key), 'type', `label and annotation values must be strings (quote ${JSON.stringify(value)})`);
  }
  return out;
}
