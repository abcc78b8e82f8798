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
  let spec: CrioCredentialProviderConfig['spec'];
  if (doc.spec !== undefined && doc.spec !== null) {
    const s = c.record(doc.spec, 'spec') ?? {};
    c.onlyKeys(s, 'spec', ['matchImages']);
    const images = c.stringList(s.matchImages, 'spec', 'matchImages');
    if (images) {
      if (images.length < 1 || images.length > 50) c.add('spec.matchImages', 'match-images', `matchImages lists 1 to 50 images, got ${images.length}`);
      images.forEach((image, i) => {
        const at = `spec.matchImages[${i}]`;
        if (image.length < 1 || image.length > 512) c.add(at, 'match-image', `a matchImages entry is 1 to 512 characters, got ${image.length}`);
        else if (image === '*') c.add(at, 'match-image', 'global wildcard \'*\' is not allowed');
        else if (!MATCH_IMAGE.test(image)) c.add(at, 'match-image', `${quote(image, 100)}: invalid matchImages value, must be a valid fully qualified domain name in lowercase with optional wildcard, port, and path`);
      });
    }
    spec = images ? { matchImages: images } : {};
  }
  if (!metadata || !c.ok) return undefined;
  return { apiVersion: CONFIG_API_VERSION, kind: KIND_CRIO_CREDENTIAL_PROVIDER_CONFIG, metadata, ...(spec ? { spec } : {}) };
}

/** credentialProviderWithTag: a provider's fields in MCO's struct, and which it leaves out when empty. */
type Provider = Record<string, unknown> & { name: string; matchImages: string[] | null };

/**
 * credProviderConfigObject: the base file read into MCO's struct (apiVersion and kind defaulted,
 * each provider's known fields kept, defaultCacheDuration as Go writes a duration). Throws,
 * naming what is wrong, where Go's unmarshalling fails.
 */
function readCredentialProviderConfig(text: string | undefined): { apiVersion: string; kind: string; providers: Provider[] } {
  const out = { apiVersion: 'kubelet.config.k8s.io/v1', kind: 'CredentialProviderConfig', providers: [] as Provider[] };
  if (text === undefined || text.trim() === '') return out;
  const raw: unknown = parseYaml(text);
  if (raw === null || raw === undefined) return out;
  if (!isRecord(raw)) throw new Error('the credential provider config is not a mapping');
  if (typeof raw.apiVersion === 'string') out.apiVersion = raw.apiVersion;
  if (typeof raw.kind === 'string') out.kind = raw.kind;
  if (raw.providers !== undefined && raw.providers !== null && !Array.isArray(raw.providers)) throw new Error('providers must be a list');
  for (const p of (raw.providers ?? []) as unknown[]) {
    if (!isRecord(p)) throw new Error('each provider must be a mapping');
    const provider: Provider = { name: String(p.name ?? ''), matchImages: Array.isArray(p.matchImages) ? p.matchImages.map(String) : null };
    if (p.defaultCacheDuration !== undefined && p.defaultCacheDuration !== null) {
      const d = parseGoDuration(String(p.defaultCacheDuration));
      if ('error' in d) throw new Error(`provider ${p.name}: defaultCacheDuration: ${d.error}`);
      provider.defaultCacheDuration = formatGoDuration(d.ns);
    }
    provider.apiVersion = String(p.apiVersion ?? '');
    if (Array.isArray(p.args) && p.args.length) provider.args = p.args.map(String);
    if (Array.isArray(p.env) && p.env.length) provider.env = p.env.filter(isRecord).map((e) => ({ name: String(e.name ?? ''), value: String(e.value ?? '') }));
    if (isRecord(p.tokenAttributes)) {
      const t = p.tokenAttributes;
      provider.tokenAttributes = {
        serviceAccountTokenAudience: String(t.serviceAccountTokenAudience ?? ''),
        cacheType: String(t.cacheType ?? ''),
        requireServiceAccount: typeof t.requireServiceAccount === 'boolean' ? t.requireServiceAccount : null,
        ...(Array.isArray(t.requiredServiceAccountAnnotationKeys) && t.requiredServiceAccountAnnotationKeys.length ? { requiredServiceAccountAnnotationKeys: t.requiredServiceAccountAnnotationKeys.map(String) } : {}),
        ...(Array.isArray(t.optionalServiceAccountAnnotationKeys) && t.optionalServiceAccountAnnotationKeys.length ? { optionalServiceAccountAnnotationKeys: t.optionalServiceAccountAnnotationKeys.map(String) } : {}),
      };
    }
    out.providers.push(provider);
  }
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
  const { yaml, overlapped } = updateCredentialProviderConfig(platformPath ? platformFiles.get(platformPath) : undefined, images);
  if (yaml === undefined) return { files: [], overlapped };
  const files: GeneratedFile[] = [{ path, contents: yaml }];
  if (path === GENERIC_CREDENTIAL_PROVIDER_CONFIG_PATH) files.push({ path: KUBELET_CRIO_CREDENTIAL_PROVIDER_DROPIN_PATH, contents: kubeletDropIn(path) });
  return { files, overlapped };
}
