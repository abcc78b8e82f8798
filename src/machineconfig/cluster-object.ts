// MachineConfigs and MachineConfigPools as a Kubernetes cluster serves them, made into the
// manifests Apply reads. A real object carries what the server and MCO keep on it (status,
// uid, resourceVersion, generation, managedFields, ownerReferences, kubectl's
// last-applied-configuration copy): none of it is configuration, so it is left out rather than
// refused. Only name, labels, annotations and spec go on; the same validation as Apply then
// decides. MCO's rendered-* configs are its own output, not input: mcplane renders its own.

import { apiKind, apiVersionOf, SOURCE_KINDS, type ImportedKind, type SourceKind } from './api-kinds.ts';

/** kubectl's copy of the whole object as last applied: large, and no part of the config. */
const DROPPED_ANNOTATIONS = new Set(['kubectl.kubernetes.io/last-applied-configuration']);

export const RENDERED_PREFIX = 'rendered-';

/** An MCO rendered config (`rendered-<pool>-<hash>`): skipped when reading a cluster. */
export function isRenderedConfigName(name: string): boolean {
  return name.startsWith(RENDERED_PREFIX);
}

/** The kinds a cluster's objects are read as: the catalogue's entries marked `imported`. */
export type ClusterKind = ImportedKind;

/**
 * Where a cluster serves the higher-level configs (cluster-scoped custom resources). A cluster
 * without one of these kinds (404: no CRD) has none of it.
 */
export const SOURCE_RESOURCES: readonly { kind: SourceKind; group: string; version: string; plural: string }[] = SOURCE_KINDS.map((kind) => {
  const { group, version, plural } = apiKind(kind);
  return { kind, group, version, plural };
});

/**
 * Whether a cluster MachineConfig is MCO's output from one of `imported` ("Kind/name" of the
 * higher-level configs being imported): mcplane generates its own from the source, as it renders.
 */
export function generatedFromImported(object: unknown, imported: ReadonlySet<string>): string | undefined {
  const refs = (object as { metadata?: { ownerReferences?: { kind?: string; name?: string }[] } } | null)?.metadata?.ownerReferences ?? [];
  return refs.map((r) => `${r.kind}/${r.name}`).find((ref) => imported.has(ref));
}

/**
 * The manifest for a cluster object of `kind` (list items of some servers carry no kind). Input
 * that is not an object is passed through, so validation reports it as Apply would.
 */
export function manifestFromClusterObject(kind: ClusterKind, object: unknown): Record<string, unknown> {
  const apiVersion = apiVersionOf(kind);
  if (object === null || typeof object !== 'object' || Array.isArray(object)) return { apiVersion, kind, metadata: {}, spec: object };
  const o = object as Record<string, unknown>;
  const meta = (o.metadata !== null && typeof o.metadata === 'object' ? o.metadata : {}) as Record<string, unknown>;
  const metadata: Record<string, unknown> = { name: meta.name };
  if (meta.labels !== undefined && meta.labels !== null) metadata.labels = meta.labels;
  if (meta.annotations !== null && typeof meta.annotations === 'object') {
    const kept = Object.entries(meta.annotations as Record<string, unknown>).filter(([k]) => !DROPPED_ANNOTATIONS.has(k));
    if (kept.length) metadata.annotations = Object.fromEntries(kept);
  }
  return { apiVersion: o.apiVersion ?? apiVersion, kind: o.kind ?? kind, metadata, ...(o.spec !== undefined ? { spec: o.spec } : {}) };
}
