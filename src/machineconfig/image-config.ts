// The registries sources: the cluster Image config (config.openshift.io/v1, spec.registrySources),
// ImageDigestMirrorSet and ImageTagMirrorSet (config.openshift.io/v1) and
// ImageContentSourcePolicy (operator.openshift.io/v1alpha1). Shapes are openshift/api's, so the
// objects `oc get -o yaml` prints apply unmodified; the per-object checks are the CRDs' and MCO's
// (validateRegistriesConfScopes in pkg/controller/container-runtime-config/helpers.go at
// machine-config-operator 7ff337a4). Checks across objects (one mirrorSourcePolicy per source)
// are made when the registries config is generated.

import { quote } from './control-characters.ts';
import { parseObjectMeta } from './object-meta.ts';
import type { ProblemCollector } from './problem-collector.ts';
import { isValidMirror, isValidMirrorSource, type MirrorRule, type MirrorSourcePolicy, type RegistrySources } from './registries-config.ts';
import type { ObjectMeta } from './types.ts';

/** RegistrySources' MaxItems and items:MaxLength. */
const MAX_REGISTRY_SCOPES = 1024;
const MAX_REGISTRY_SCOPE_CHARS = 256;

export const CONFIG_API_VERSION = 'config.openshift.io/v1';
export const OPERATOR_V1ALPHA1_API_VERSION = 'operator.openshift.io/v1alpha1';
export const KIND_IMAGE = 'Image';
export const KIND_IMAGE_DIGEST_MIRROR_SET = 'ImageDigestMirrorSet';
export const KIND_IMAGE_TAG_MIRROR_SET = 'ImageTagMirrorSet';
export const KIND_IMAGE_CONTENT_SOURCE_POLICY = 'ImageContentSourcePolicy';
export const CLUSTER_IMAGE = 'cluster';

export interface ImageConfig {
  apiVersion: string;
  kind: typeof KIND_IMAGE;
  metadata: ObjectMeta;
  spec: { registrySources: RegistrySources };
}

export interface MirrorSetObject {
  apiVersion: string;
  kind: typeof KIND_IMAGE_DIGEST_MIRROR_SET | typeof KIND_IMAGE_TAG_MIRROR_SET | typeof KIND_IMAGE_CONTENT_SOURCE_POLICY;
  metadata: ObjectMeta;
  /** The object's rules in its own order; ICSP's carry mirrorSourcePolicy "". */
  rules: MirrorRule[];
}

const MIRROR_LIST_FIELD = {
  [KIND_IMAGE_DIGEST_MIRROR_SET]: 'imageDigestMirrors',
  [KIND_IMAGE_TAG_MIRROR_SET]: 'imageTagMirrors',
  [KIND_IMAGE_CONTENT_SOURCE_POLICY]: 'repositoryDigestMirrors',
} as const;

/** The object's apiVersion must be `expected` (the kinds here are openshift/api's, one version each). */
export function checkApi(doc: Record<string, unknown>, c: ProblemCollector, expected: string): void {
  if (doc.apiVersion !== expected) c.add('apiVersion', 'api-version', `apiVersion must be "${expected}", got ${JSON.stringify(doc.apiVersion ?? null)}`);
}

/** Image/cluster: only registrySources is read; the rest of the spec (import settings, CAs) is accepted and dropped. */
export function parseImageConfig(doc: Record<string, unknown>, c: ProblemCollector): ImageConfig | undefined {
  checkApi(doc, c, CONFIG_API_VERSION);
  const metadata = parseObjectMeta(doc.metadata, c);
  if (metadata && metadata.name !== CLUSTER_IMAGE) {
    c.add('metadata.name', 'cluster-name', `only the Image config named "${CLUSTER_IMAGE}" is read (MCO's rule), got ${quote(metadata.name, 100)}`);
  }
  const spec = c.record(doc.spec, 'spec') ?? {};
  c.onlyKeys(spec, 'spec', ['registrySources', 'allowedRegistriesForImport', 'externalRegistryHostnames', 'additionalTrustedCA', 'imageStreamImportMode']);
  const raw = c.record(spec.registrySources, 'spec.registrySources') ?? {};
  const f = 'spec.registrySources';
  c.onlyKeys(raw, f, ['insecureRegistries', 'blockedRegistries', 'allowedRegistries', 'containerRuntimeSearchRegistries']);
  const sources: RegistrySources = {};
  const lists = [['insecureRegistries', 'insecure'], ['blockedRegistries', 'blocked'], ['allowedRegistries', 'allowed']] as const;
  for (const [key, word] of lists) {
    const list = c.stringList(raw[key], f, key);
    if (!list) continue;
    sources[key] = list;
    // The Image CRD's schema (openshift/api config/v1 RegistrySources): the API server refuses
    // these before MCO ever reads them.
    if (list.length > MAX_REGISTRY_SCOPES) c.add(`${f}.${key}`, 'registry-list-size', `${key} may list at most ${MAX_REGISTRY_SCOPES} registries, got ${list.length}`);
    list.forEach((scope, i) => {
      const at = `${f}.${key}[${i}]`;
      if (scope.length < 1 || scope.length > MAX_REGISTRY_SCOPE_CHARS) c.add(at, 'registry-scope-length', `${word} registry ${quote(scope, 100)} must be 1 to ${MAX_REGISTRY_SCOPE_CHARS} characters, got ${scope.length}`);
      // The CRD's pattern holds MCO's own scope rule (validateRegistriesConfScopes: a wildcard
      // only as a leading "*.host"), which generation checks again for objects stored before.
      else if (!isValidMirrorSource(scope)) c.add(at, 'registry-scope-format', `${word} registry ${quote(scope, 100)}: each registry must be a valid hostname[:port][/path] or wildcard *.hostname format without tags or digests`);
    });
  }
  const search = c.stringList(raw.containerRuntimeSearchRegistries, f, 'containerRuntimeSearchRegistries');
  if (search) {
    sources.containerRuntimeSearchRegistries = search;
    // MinItems=1 and listType=set.
    if (search.length === 0) c.add(`${f}.containerRuntimeSearchRegistries`, 'search-registries', 'containerRuntimeSearchRegistries must list at least one registry when it is set');
    search.forEach((r, i) => {
      if (search.indexOf(r) !== i) c.add(`${f}.containerRuntimeSearchRegistries[${i}]`, 'search-registries', `${quote(r, 100)} is listed twice (the list is a set)`);
    });
  }
  // The CRD's rule is on the fields being there, an empty list too: has(blocked) ? !has(allowed).
  if (sources.allowedRegistries !== undefined && sources.blockedRegistries !== undefined) {
    c.add(f, 'allowed-and-blocked', 'invalid images config: only one of AllowedRegistries or BlockedRegistries may be specified');
  }
  if (!metadata || !c.ok) return undefined;
  return { apiVersion: CONFIG_API_VERSION, kind: KIND_IMAGE, metadata, spec: { registrySources: sources } };
}

/** ImageDigestMirrorSet, ImageTagMirrorSet or ImageContentSourcePolicy, by the document's kind. */
export function parseMirrorSet(doc: Record<string, unknown>, c: ProblemCollector): MirrorSetObject | undefined {
  const kind = doc.kind as MirrorSetObject['kind'];
  const icsp = kind === KIND_IMAGE_CONTENT_SOURCE_POLICY;
  const apiVersion = icsp ? OPERATOR_V1ALPHA1_API_VERSION : CONFIG_API_VERSION;
  checkApi(doc, c, apiVersion);
  const metadata = parseObjectMeta(doc.metadata, c);
  const listField = MIRROR_LIST_FIELD[kind];
  const spec = c.record(doc.spec, 'spec') ?? {};
  c.onlyKeys(spec, 'spec', [listField]);
  const rules: MirrorRule[] = [];
  (c.array(spec[listField], 'spec', listField) ?? []).forEach((rawRule, i) => {
    const f = `spec.${listField}[${i}]`;
    const r = c.record(rawRule, f);
    if (!r) return;
    c.onlyKeys(r, f, icsp ? ['source', 'mirrors'] : ['source', 'mirrors', 'mirrorSourcePolicy']);
    const source = c.string(r.source, f, 'source');
    if (source === undefined) c.add(`${f}.source`, 'required', 'a mirror rule needs its source');
    else if (!isValidMirrorSource(source)) c.add(`${f}.source`, 'mirror-source-format', `invalid format for source ${quote(source, 100)}`);
    const mirrors = c.stringList(r.mirrors, f, 'mirrors') ?? [];
    const policy = (c.string(r.mirrorSourcePolicy, f, 'mirrorSourcePolicy') ?? '') as MirrorSourcePolicy;
    if (!['', 'AllowContactingSource', 'NeverContactSource'].includes(policy)) c.add(`${f}.mirrorSourcePolicy`, 'mirror-source-policy', `mirrorSourcePolicy must be AllowContactingSource or NeverContactSource, got ${quote(policy, 100)}`);
    mirrors.forEach((m, j) => {
      if (!isValidMirror(m)) c.add(`${f}.mirrors[${j}]`, 'mirror-format', `invalid format for mirror ${quote(m, 100)}`);
      else if (policy === 'NeverContactSource' && m === source) c.add(`${f}.mirrors[${j}]`, 'never-contact-source-mirror', `cannot set mirrorSourcePolicy: NeverContactSource if the source ${quote(source, 100)} is one of the mirrors`);
    });
    // IDMS and ITMS mirrors are a listType=set; ICSP's are a plain list, which MCO takes as it is.
    if (!icsp && new Set(mirrors).size !== mirrors.length) c.add(`${f}.mirrors`, 'duplicate-entry', 'each mirror may be listed once (the CRD\'s rule)');
    if (source !== undefined) rules.push({ source, mirrors, mirrorSourcePolicy: policy });
  });
  if (!metadata || !c.ok) return undefined;
  return { apiVersion, kind, metadata, rules };
}
