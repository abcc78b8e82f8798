// CRIOCredentialProviderConfig (config.openshift.io/v1, the singleton "cluster"): images whose pull
// credentials the kubelet asks CRI-O's credential provider for (a pod's own pull secrets, for
// mirrors). MCO, behind CRIOCredentialProviderConfig (on in the Default feature set of
// self-managed clusters at 7ff337a4), adds a crio-credential-provider entry to the platform's
// kubelet credential provider config, or writes a generic one with a kubelet drop-in that points
// at it, in `97-<pool>-generated-credentialproviderconfig`. Followed:
// pkg/controller/container-runtime-config/helpers.go (credProviderConfigObject,
// updateCredentialProviderConfig, generateDropinUnitCredProviderConfig) and
// container_runtime_config_controller.go (generateOriginalCredentialProviderConfig,
// crioCredentialProviderConfigIgnition, syncCRIOCredentialProviderConfig); the CRD's rules from
// openshift/api config/v1 types_crio_credential_provider_config.go.
//
// MCO picks the platform's file (ecr on AWS, gcr on GCP, acr on Azure, else the generic one) from
// its Infrastructure object, and renders its base from its templates. mcplane has neither: the
// platform's file is the one the pool's own MachineConfigs provide (an imported cluster's
// 01-<pool>-kubelet carries it), and without one the generic file is written, as on bare metal.

import { parse as parseYaml } from 'yaml';
import { quote } from './control-characters.ts';
import { formatGoDuration, parseGoDuration } from './go-duration.ts';
import { stringifyGoYaml } from './go-yaml.ts';
import { checkApi, CONFIG_API_VERSION } from './image-config.ts';
import { parseObjectMeta } from './object-meta.ts';
import { isRecord, type ProblemCollector } from './problem-collector.ts';
import { scopeIsNestedInsideScope, type GeneratedFile } from './registries-config.ts';
import type { ObjectMeta } from './types.ts';

export const KIND_CRIO_CREDENTIAL_PROVIDER_CONFIG = 'CRIOCredentialProviderConfig';
export const CRIO_CREDENTIAL_PROVIDER_NAME = 'crio-credential-provider';
export const GENERIC_CREDENTIAL_PROVIDER_CONFIG_PATH = '/etc/kubernetes/credential-providers/generic-credential-provider.yaml';
/** The platforms' files, as MCO's templates name them (render.go). */
export const PLATFORM_CREDENTIAL_PROVIDER_CONFIG_PATHS = ['ecr', 'gcr', 'acr'].map((p) => `/etc/kubernetes/credential-providers/${p}-credential-provider.yaml`);
/** constants.KubeletCrioImageCredProviderConfPath. */
export const KUBELET_CRIO_CREDENTIAL_PROVIDER_DROPIN_PATH = '/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf';

export interface CrioCredentialProviderConfig {
  apiVersion: string;
  kind: typeof KIND_CRIO_CREDENTIAL_PROVIDER_CONFIG;
  metadata: ObjectMeta;
  spec?: { matchImages?: string[] };
}

const MATCH_IMAGE = /^((\*|[a-z0-9]([a-z0-9-]*[a-z0-9])?)(\.(\*|[a-z0-9]([a-z0-9-]*[a-z0-9])?))*)(:[0-9]+)?(\/[-a-z0-9._/]*)?$/;

/** Validates a CRIOCredentialProviderConfig with the CRD's rules; every problem goes into `c`. */
export function parseCrioCredentialProviderConfig(doc: Record<string, unknown>, c: ProblemCollector): CrioCredentialProviderConfig | undefined {
  checkApi(doc, c, CONFIG_API_VERSION);
  const metadata = parseObjectMeta(doc.metadata, c);
  if (metadata && metadata.name !== 'cluster') c.add('metadata.name', 'cluster-name', 'criocredentialproviderconfig is a singleton, .metadata.name must be \'cluster\'');
  if (doc.spec === undefined || doc.spec === null) {
    c.add('spec', 'required', 'spec is required (an empty spec, {}, renders no file)');
    return undefined;
  }
  const s = c.record(doc.spec, 'spec') ?? {};
  c.onlyKeys(s, 'spec', ['matchImages']);
  const spec: NonNullable<CrioCredentialProviderConfig['spec']> = {};
  const raw = c.array(s.matchImages, 'spec', 'matchImages');
  if (raw) {
    if (raw.length < 1 || raw.length > 50) c.add('spec.matchImages', 'match-images', `matchImages lists 1 to 50 images, got ${raw.length}`);
    const images: string[] = [];
    raw.forEach((image, i) => {
      const at = `spec.matchImages[${i}]`;
      if (typeof image !== 'string') return void c.string(image, at);
      if (image.length < 1 || image.length > 512) c.add(at, 'match-image', `a matchImages entry is 1 to 512 characters, got ${image.length}`);
      else if (image === '*') c.add(at, 'match-image', 'global wildcard \'*\' is not allowed');
      else if (!MATCH_IMAGE.test(image)) c.add(at, 'match-image', `${quote(image, 100)}: invalid matchImages value, must be a valid fully qualified domain name in lowercase with optional wildcard, port, and path`);
      else if (images.includes(image)) c.add(at, 'duplicate-entry', `${quote(image, 100)} is listed twice (the list is a set)`);
      images.push(image);
    });
    spec.matchImages = images;
  }
  if (!metadata || !c.ok) return undefined;
  return { apiVersion: CONFIG_API_VERSION, kind: KIND_CRIO_CREDENTIAL_PROVIDER_CONFIG, metadata, spec };
}

/** credentialProviderWithTag: a provider's fields in MCO's struct, and which it leaves out when empty. */
type Provider = Record<string, unknown> & { name: string; matchImages: string[] | null };

/**
 * credProviderConfigObject: the base file read into MCO's struct as ghodss/yaml reads it (YAML
 * 1.1, through JSON into Go types): apiVersion and kind defaulted, each provider's known fields
 * kept, defaultCacheDuration as Go writes a duration. Throws, naming the field, where Go's
 * unmarshalling fails (a value of another type).
 */
function readCredentialProviderConfig(text: string | undefined): { apiVersion: string; kind: string; providers: Provider[] } {
  const out = { apiVersion: 'kubelet.config.k8s.io/v1', kind: 'CredentialProviderConfig', providers: [] as Provider[] };
  if (text === undefined || text.trim() === '') return out;
  const raw: unknown = parseYaml(text, { version: '1.1' });
  if (raw === null || raw === undefined) return out;
  if (!isRecord(raw)) throw new Error('the credential provider config is not a mapping');
  const str = (v: unknown, field: string): string => {
    if (v === undefined || v === null) return '';
    if (typeof v !== 'string') throw new Error(`${field} must be a string, got ${JSON.stringify(v)}`);
    return v;
  };
  const strings = (v: unknown, field: string): string[] | null => {
    if (v === undefined || v === null) return null;
    if (!Array.isArray(v)) throw new Error(`${field} must be a list, got ${JSON.stringify(v)}`);
    return v.map((x, i) => str(x, `${field}[${i}]`));
  };
  if (raw.apiVersion !== undefined && raw.apiVersion !== null) out.apiVersion = str(raw.apiVersion, 'apiVersion');
  if (raw.kind !== undefined && raw.kind !== null) out.kind = str(raw.kind, 'kind');
  if (raw.providers !== undefined && raw.providers !== null && !Array.isArray(raw.providers)) throw new Error('providers must be a list');
  ((raw.providers ?? []) as unknown[]).forEach((p, i) => {
    const f = `providers[${i}]`;
    if (!isRecord(p)) throw new Error(`${f} must be a mapping`);
    const provider: Provider = { name: str(p.name, `${f}.name`), matchImages: strings(p.matchImages, `${f}.matchImages`) };
    if (p.defaultCacheDuration !== undefined && p.defaultCacheDuration !== null) {
      const d = parseGoDuration(str(p.defaultCacheDuration, `${f}.defaultCacheDuration`));
      if ('error' in d) throw new Error(`${f}.defaultCacheDuration: ${d.error}`);
      provider.defaultCacheDuration = formatGoDuration(d.ns);
    }
    provider.apiVersion = str(p.apiVersion, `${f}.apiVersion`);
    const args = strings(p.args, `${f}.args`);
    if (args?.length) provider.args = args;
    if (p.env !== undefined && p.env !== null) {
      if (!Array.isArray(p.env)) throw new Error(`${f}.env must be a list`);
      const env = p.env.map((e, j) => {
        if (!isRecord(e)) throw new Error(`${f}.env[${j}] must be a mapping`);
        return { name: str(e.name, `${f}.env[${j}].name`), value: str(e.value, `${f}.env[${j}].value`) };
      });
      if (env.length) provider.env = env;
    }
    if (p.tokenAttributes !== undefined && p.tokenAttributes !== null) {
      const t = p.tokenAttributes;
      if (!isRecord(t)) throw new Error(`${f}.tokenAttributes must be a mapping`);
      if (t.requireServiceAccount !== undefined && t.requireServiceAccount !== null && typeof t.requireServiceAccount !== 'boolean') throw new Error(`${f}.tokenAttributes.requireServiceAccount must be true or false`);
      const required = strings(t.requiredServiceAccountAnnotationKeys, `${f}.tokenAttributes.requiredServiceAccountAnnotationKeys`);
      const optional = strings(t.optionalServiceAccountAnnotationKeys, `${f}.tokenAttributes.optionalServiceAccountAnnotationKeys`);
      provider.tokenAttributes = {
        serviceAccountTokenAudience: str(t.serviceAccountTokenAudience, `${f}.tokenAttributes.serviceAccountTokenAudience`),
        cacheType: str(t.cacheType, `${f}.tokenAttributes.cacheType`),
        requireServiceAccount: typeof t.requireServiceAccount === 'boolean' ? t.requireServiceAccount : null,
        ...(required?.length ? { requiredServiceAccountAnnotationKeys: required } : {}),
        ...(optional?.length ? { optionalServiceAccountAnnotationKeys: optional } : {}),
      };
    }
    out.providers.push(provider);
  });
  return out;
}

/**
 * updateCredentialProviderConfig: the crio-credential-provider entry set to the images no other
 * provider already covers (those are returned as overlapped, sorted), added with MCO's defaults
 * when the base has none. The YAML is undefined when every image overlaps.
 */
export function updateCredentialProviderConfig(base: string | undefined, matchImages: readonly string[]): { yaml?: string; overlapped: string[] } {
  const config = readCredentialProviderConfig(base);
  const others = config.providers.filter((p) => p.name !== CRIO_CREDENTIAL_PROVIDER_NAME);
  const overlapped = new Set<string>();
  const kept = new Set<string>();
  for (const image of matchImages) {
    const conflicts = others.some((p) => (p.matchImages ?? []).some((existing) => scopeIsNestedInsideScope(image, existing) || scopeIsNestedInsideScope(existing, image)));
    if (conflicts) overlapped.add(image);
    else kept.add(image);
  }
  const overlappedList = [...overlapped].sort();
  if (kept.size === 0 && overlapped.size > 0) return { overlapped: overlappedList };
  const images = [...(kept.size > 0 ? kept : new Set(matchImages))].sort();
  const crio = config.providers.find((p) => p.name === CRIO_CREDENTIAL_PROVIDER_NAME);
  if (crio) crio.matchImages = images;
  else {
    config.providers.push({
      name: CRIO_CREDENTIAL_PROVIDER_NAME,
      matchImages: images,
      defaultCacheDuration: '1s',
      apiVersion: 'credentialprovider.kubelet.k8s.io/v1',
      tokenAttributes: { serviceAccountTokenAudience: 'https://kubernetes.default.svc', cacheType: 'Token', requireServiceAccount: false },
    });
  }
  return { yaml: stringifyGoYaml(config), overlapped: overlappedList };
}

/** generateDropinUnitCredProviderConfig: the kubelet flags that point it at the generic file. */
function kubeletDropIn(path: string): string {
  return `[Service]\n# Prepends the credential provider flags to the existing Kubelet arguments\nEnvironment="KUBELET_CRIO_IMAGE_CREDENTIAL_PROVIDER_FLAGS=--image-credential-provider-bin-dir=/usr/libexec/kubelet-image-credential-provider-plugins --image-credential-provider-config=${path}"\n`;
}

/**
 * crioCredentialProviderConfigIgnition for a pool: the platform's credential provider config
 * (the one of `platformFiles`, the pool's own, that exists) with the CRI-O entry, or the generic
 * file and the kubelet drop-in; no file at all when matchImages is empty or every image overlaps.
 */
export function generateCredentialProviderFiles(cfg: CrioCredentialProviderConfig, platformFiles: ReadonlyMap<string, string>): { files: GeneratedFile[]; overlapped: string[] } {
  const platformPath = PLATFORM_CREDENTIAL_PROVIDER_CONFIG_PATHS.find((p) => platformFiles.has(p));
  const path = platformPath ?? GENERIC_CREDENTIAL_PROVIDER_CONFIG_PATH;
  const images = cfg.spec?.matchImages ?? [];
  if (images.length === 0) return { files: [], overlapped: [] };
  let result: ReturnType<typeof updateCredentialProviderConfig>;
  try {
    result = updateCredentialProviderConfig(platformPath ? platformFiles.get(platformPath) : undefined, images);
  } catch (err) {
    throw new Error(`${path}: ${(err as Error).message.split('\n')[0]}`);
  }
  const { yaml, overlapped } = result;
  if (yaml === undefined) return { files: [], overlapped };
  const files: GeneratedFile[] = [{ path, contents: yaml }];
  if (path === GENERIC_CREDENTIAL_PROVIDER_CONFIG_PATH) files.push({ path: KUBELET_CRIO_CREDENTIAL_PROVIDER_DROPIN_PATH, contents: kubeletDropIn(path) });
  return { files, overlapped };
}
