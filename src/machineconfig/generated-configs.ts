// The higher-level configs (KubeletConfig, ContainerRuntimeConfig, and the registries sources:
// Image/cluster, ImageDigestMirrorSet, ImageTagMirrorSet, ImageContentSourcePolicy,
// ClusterImagePolicy; and CRIOCredentialProviderConfig) made into the
// MachineConfigs MCO's kubelet-config and container-runtime-config controllers would write, as
// one pure function: sources + pools + the stored MachineConfigs -> the generated MachineConfigs
// wanted, and a status per source. A control-plane controller writes the difference.
//
// Each generated MachineConfig is built from the pool's own configs (its base kubelet.conf,
// registries.conf, policy.json, storage.conf), never from other generated ones, so two
// KubeletConfigs for a pool never merge with each other (MCO's rule). A source that fails keeps
// the MachineConfigs it generated before (MCO leaves them in place and reports the failure).

import { API_KINDS, REGISTRIES_KINDS as REGISTRIES_SOURCE_KINDS, SOURCE_KINDS, type SourceKind } from './api-kinds.ts';
import { ROLE_LABEL, MASTER_POOL, WORKER_POOL, API_VERSION, KIND_MACHINE_CONFIG } from './constants.ts';
import { encodeDataUrl, decodeDataUrl } from './data-url.ts';
import { GenerateConfigError, type Problem } from './errors.ts';
import { emptyIgnitionConfig } from './ignition.ts';
import { generateContainerRuntimeFiles, KIND_CONTAINER_RUNTIME_CONFIG, STORAGE_CONF_PATH, type ContainerRuntimeConfig } from './container-runtime-config.ts';
import { parseMirrorSet, CLUSTER_IMAGE, CONFIG_API_VERSION, KIND_IMAGE, KIND_IMAGE_CONTENT_SOURCE_POLICY, KIND_IMAGE_DIGEST_MIRROR_SET, KIND_IMAGE_TAG_MIRROR_SET, type ImageConfig, type MirrorSetObject } from './image-config.ts';
import { generateCredentialProviderFiles, KIND_CRIO_CREDENTIAL_PROVIDER_CONFIG, PLATFORM_CREDENTIAL_PROVIDER_CONFIG_PATHS, type CrioCredentialProviderConfig } from './crio-credential-provider.ts';
import { clusterScopePolicies, KIND_CLUSTER_IMAGE_POLICY, SIGSTORE_REGISTRIES_PATH, sigstoreRegistriesYaml, type ClusterImagePolicy } from './image-policy.ts';
import { generateKubeletFiles, KIND_KUBELET_CONFIG, KUBELET_CONF_PATH, managedKey, poolsSelectedBy, type KubeletConfig, type NamedSource } from './kubelet-config.ts';
import type { PinnedImageSet } from './pinned-image-set.ts';
import { configsForPool } from './pool-membership.ts';
import type { ProblemCollector } from './problem-collector.ts';
import { compare, decodeRegistriesConf, generateRegistriesFiles, POLICY_JSON_PATH, REGISTRIES_CONF_PATH, registriesProblems, type GeneratedFile, type LocatedMirrorRule } from './registries-config.ts';
import { mergeSpecs } from './render.ts';
import type { MachineConfig, MachineConfigPool, ObjectMeta, OwnerReference } from './types.ts';

/** ctrlcommon.GeneratedByControllerVersionAnnotationKey, which MCO sets on every generated config. */
export const GENERATED_BY_ANNOTATION = 'machineconfiguration.openshift.io/generated-by-controller-version';
export const GENERATED_BY_VALUE = 'mcplane';
// The higher-level config kinds are the catalogue's entries marked `source`.
export { SOURCE_KINDS, type SourceKind } from './api-kinds.ts';
/** The kinds whose objects make the registries config together, and share its outcome. */
const REGISTRIES_KINDS: ReadonlySet<string> = new Set(REGISTRIES_SOURCE_KINDS);

/**
 * Kinds MCO turns into node files that mcplane does not take, each with what MCO does with it
 * (machine-config-operator 7ff337a4; the gates' feature sets are the vendored openshift/api
 * features/features.go), so applying one says why it is refused rather than "unknown kind".
 */
export const UNIMPLEMENTED_MCO_KINDS: Readonly<Record<string, string>> = {
  ImagePolicy: 'config.openshift.io/v1 ImagePolicy is not implemented by mcplane: it is a namespaced object, and mcplane stores none; MCO, behind the SigstoreImageVerification feature gate (on in the Default feature set at MCO 7ff337a4), writes a namespace\'s sigstore requirements to /etc/crio/policies/<namespace>.json. A ClusterImagePolicy for the same scopes applies to every namespace',
  APIServer: 'config.openshift.io/v1 APIServer is not taken by mcplane: MCO renders its spec.tlsSecurityProfile into the templated kubelet.conf of 01-<pool>-kubelet, and mcplane takes that file from the pool\'s imported configs as it is; to set a pool\'s kubelet TLS profile, use KubeletConfig spec.tlsSecurityProfile',
};

export interface GeneratedConfigsInput {
  /** The pools to generate for. */
  pools: readonly MachineConfigPool[];
  /**
   * Every pool a source may select, for the no-pool check; `pools` when absent. The offline
   * render generates for one pool (and worker) but knows every pool given to it: a source that
   * selects only another of those is not a source that selects no pool.
   */
  knownPools?: readonly MachineConfigPool[];
  /** Every stored MachineConfig, the generated ones included. */
  configs: readonly MachineConfig[];
  /** In creation order: a later KubeletConfig for a pool takes the next `-N`. */
  kubeletConfigs: readonly KubeletConfig[];
  containerRuntimeConfigs: readonly ContainerRuntimeConfig[];
  image?: ImageConfig;
  /** ImageDigestMirrorSets, ImageTagMirrorSets and ImageContentSourcePolicies, any order. */
  mirrorSets: readonly MirrorSetObject[];
  /** In creation order: a scope's requirements are listed in it. */
  clusterImagePolicies?: readonly ClusterImagePolicy[];
  /** The singleton CRIOCredentialProviderConfig/cluster, if there is one. */
  crioCredentialProviderConfig?: CrioCredentialProviderConfig;
}

/** One status condition as MCO writes it on KubeletConfig/ContainerRuntimeConfig (message "Success" or "Error: ..."). */
export interface SourceCondition {
  type: string;
  status: 'True' | 'False';
  /** metav1.Condition's reason, on the kinds whose conditions have one (CRIOCredentialProviderConfig). */
  reason?: string;
  message: string;
}

export interface SourceStatus {
  /** "Kind/name". */
  object: string;
  conditions: SourceCondition[];
  /** The generated MachineConfigs this source owns (wanted now, or kept from before on failure). */
  generated: string[];
  problems: Problem[];
}

export interface GeneratedConfigs {
  configs: MachineConfig[];
  statuses: SourceStatus[];
}

/** Whether a stored MachineConfig is one of the generated ones (and so never a base). */
export function isGeneratedConfig(mc: MachineConfig): boolean {
  return (mc.metadata.ownerReferences ?? []).some((o) => (SOURCE_KINDS as readonly string[]).includes(o.kind));
}

/** MCO's conditions: KubeletConfig has Accepted plus the legacy Success/Failure; ContainerRuntimeConfig Success/Failure. */
export function sourceConditions(kind: string, problems: Problem[], overlapped: readonly string[] = []): SourceCondition[] {
  const message = problems.length === 0 ? 'Success' : `Error: ${problems.map((p) => p.message).join('; ')}`;
  if (kind === KIND_CRIO_CREDENTIAL_PROVIDER_CONFIG) {
    // wrapErrorWithCRIOCredentialProviderConfigCondition, as syncCRIOCredentialProviderConfig sets
    // them: on a failure only MachineConfigRendered, with its own message (no "Error:" prefix);
    // otherwise Validated (False when images overlap), then MachineConfigRendered.
    if (problems.length > 0) {
      return [{ type: 'MachineConfigRendered', status: 'False', reason: 'MachineConfigRenderingFailed', message: `could not generate CRIOCredentialProvider Ignition config: ${problems.map((p) => p.message).join('; ')}` }];
    }
    const validated: SourceCondition = overlapped.length
      ? { type: 'Validated', status: 'False', reason: 'ConfigurationPartiallyApplied', message: `CRIOCredentialProviderConfig has one or multiple entries that overlap with the original credential provider config. Skip rendering entries: [${overlapped.join(' ')}].` }
      : { type: 'Validated', status: 'True', reason: 'Succeeded', message: 'Success' };
    return [validated, { type: 'MachineConfigRendered', status: 'True', reason: 'MachineConfigRenderingSucceeded', message: 'Success' }];
  }
  const legacy: SourceCondition = { type: problems.length === 0 ? 'Success' : 'Failure', status: 'True', message };
  if (kind === KIND_KUBELET_CONFIG) return [{ type: 'Accepted', status: problems.length === 0 ? 'True' : 'False', message }, legacy];
  return [legacy];
}

function ownerRef(apiVersion: string, kind: string, name: string, controller: boolean): OwnerReference {
  return controller ? { apiVersion, kind, name, controller: true, blockOwnerDeletion: true } : { apiVersion, kind, name };
}

/** ctrlcommon.MachineConfigFromIgnConfig + NewIgnFileBytesOverwriting: the role label, mode 0644, overwrite. */
export function generatedMachineConfig(name: string, role: string, files: GeneratedFile[], owners: OwnerReference[]): MachineConfig {
  const config = emptyIgnitionConfig();
  config.storage.files = files.map((f) => ({ path: f.path, mode: 0o644, overwrite: true, contents: { source: encodeDataUrl(Buffer.from(f.contents)) } }));
  return {
    apiVersion: API_VERSION,
    kind: KIND_MACHINE_CONFIG,
    metadata: { name, labels: { [ROLE_LABEL]: role }, annotations: { [GENERATED_BY_ANNOTATION]: GENERATED_BY_VALUE }, ownerReferences: owners },
    spec: { config, kernelArguments: [], kernelType: 'default', fips: false, extensions: [], osImageURL: '', baseOSExtensionsContainerImage: '' },
  };
}

/**
 * syncImageConfig's pools: those labelled mco-built-in="" (master, worker and, on a two-node
 * cluster with an arbiter, arbiter, as MCO's manifests label them), and mcplane's own master and
 * worker, which exist without a cluster to label them.
 */
function isBuiltInPool(pool: MachineConfigPool): boolean {
  return pool.metadata.labels?.[MCO_BUILT_IN_LABEL] === '' || pool.metadata.name === MASTER_POOL || pool.metadata.name === WORKER_POOL;
}

/** The contents of `path` in the merge of the pool's own (not generated) configs. */
function baseFile(pool: MachineConfigPool, baseConfigs: readonly MachineConfig[], path: string): string | undefined {
  const spec = mergeSpecs(configsForPool(pool, baseConfigs).map((mc) => mc.spec));
  const file = spec.config.storage.files.find((f) => f.path === path);
  if (!file) return undefined;
  const decoded = decodeDataUrl(file.contents.source);
  return 'bytes' in decoded ? decoded.bytes.toString('utf8') : undefined;
}

function problemsOf(err: unknown): Problem[] {
  if (err instanceof GenerateConfigError) return err.problems;
  throw err;
}

/**
 * The sigstore attachments file, after policy.json as registriesConfigIgnition lists it, made from
 * the registries.conf just generated (the scopes alone when there is none). A scope whose mirrors
 * make no valid reference fails the registries config, naming the first policy with that scope.
 */
function addSigstoreRegistries(files: GeneratedFile[], scopes: string[], policies: readonly ClusterImagePolicy[]): void {
  const registries = files.find((f) => f.path === REGISTRIES_CONF_PATH);
  const objectOf = (scope: string): string => `${KIND_CLUSTER_IMAGE_POLICY}/${policies.find((p) => p.spec.scopes.includes(scope))!.metadata.name}`;
  const yaml = sigstoreRegistriesYaml(scopes, registries ? decodeRegistriesConf(registries.contents) : undefined, objectOf);
  if (yaml === undefined) return;
  const at = files.findIndex((f) => f.path === POLICY_JSON_PATH);
  files.splice(at + 1, 0, { path: SIGSTORE_REGISTRIES_PATH, contents: yaml });
}

/** Objects in name order, as MCO's listers give them. */
const byName = (a: { metadata: ObjectMeta }, b: { metadata: ObjectMeta }): number => compare(a.metadata.name, b.metadata.name);

/** builtInLabelKey in MCO's container runtime config controller. */
const MCO_BUILT_IN_LABEL = 'machineconfiguration.openshift.io/mco-built-in';

export function desiredGeneratedConfigs(input: GeneratedConfigsInput): GeneratedConfigs {
  const baseConfigs = input.configs.filter((mc) => !isGeneratedConfig(mc));
  const existing = input.configs.filter(isGeneratedConfig);
  const out: MachineConfig[] = [];
  const statuses: SourceStatus[] = [];
  const ownedBy = (kind: string, name: string): MachineConfig[] =>
    existing.filter((mc) => mc.metadata.ownerReferences?.some((o) => o.kind === kind && o.name === name));

  // KubeletConfig and ContainerRuntimeConfig: one generated config per selected pool.
  const perPool = <T extends KubeletConfig | ContainerRuntimeConfig>(kind: typeof KIND_KUBELET_CONFIG | typeof KIND_CONTAINER_RUNTIME_CONFIG, sources: readonly T[], files: (s: T, pool: MachineConfigPool) => GeneratedFile[]): void => {
    const suffix = kind === KIND_KUBELET_CONFIG ? 'kubelet' : 'containerruntime';
    const named: NamedSource[] = sources.map((s) => ({ name: s.metadata.name, ...(s.metadata.annotations ? { annotations: s.metadata.annotations } : {}), selector: s.spec.machineConfigPoolSelector }));
    for (const pool of input.pools) {
      // The names sources already hold for this pool: kept stable across syncs.
      const owned = new Map<string, string>();
      for (const mc of existing) {
        const o = mc.metadata.ownerReferences?.find((r) => r.kind === kind);
        if (o && mc.metadata.labels?.[ROLE_LABEL] === pool.metadata.name && mc.metadata.name.startsWith(`99-${pool.metadata.name}-generated-${suffix}`)) owned.set(o.name, mc.metadata.name);
      }
      for (const s of sources) {
        if (poolsSelectedBy(s.spec.machineConfigPoolSelector, [pool]).length === 0) continue;
        const status = statusFor(kind, s.metadata.name);
        try {
          const name = managedKey(pool, suffix, named.find((n) => n.name === s.metadata.name)!, named, owned);
          owned.set(s.metadata.name, name);
          const mc = generatedMachineConfig(name, pool.metadata.name, files(s, pool), [ownerRef(API_VERSION, kind, s.metadata.name, true)]);
          status.wanted.push(mc);
        } catch (err) {
          status.problems.push(...problemsOf(err));
        }
      }
    }
  };
  // `overlapped`: a CRIOCredentialProviderConfig's images another provider already covers.
  const pending = new Map<string, { kind: string; name: string; wanted: MachineConfig[]; problems: Problem[]; overlapped: string[] }>();
  const statusFor = (kind: string, name: string) => {
    const key = `${kind}/${name}`;
    let s = pending.get(key);
    if (!s) pending.set(key, (s = { kind, name, wanted: [], problems: [], overlapped: [] }));
    return s;
  };
  const knownPools = input.knownPools ?? input.pools;
  for (const kc of input.kubeletConfigs) {
    const s = statusFor(KIND_KUBELET_CONFIG, kc.metadata.name);
    if (poolsSelectedBy(kc.spec.machineConfigPoolSelector, knownPools).length === 0) {
      s.problems.push({ object: `${KIND_KUBELET_CONFIG}/${kc.metadata.name}`, field: 'spec.machineConfigPoolSelector', rule: 'no-pool', message: `KubeletConfig ${kc.metadata.name} does not match any MachineConfigPools` });
    }
  }
  for (const cr of input.containerRuntimeConfigs) {
    const s = statusFor(KIND_CONTAINER_RUNTIME_CONFIG, cr.metadata.name);
    if (poolsSelectedBy(cr.spec.machineConfigPoolSelector, knownPools).length === 0) {
      s.problems.push({ object: `${KIND_CONTAINER_RUNTIME_CONFIG}/${cr.metadata.name}`, field: 'spec.machineConfigPoolSelector', rule: 'no-pool', message: `containerRuntimeConfig ${cr.metadata.name} does not match any MachineConfigPools` });
    }
  }
  perPool(KIND_KUBELET_CONFIG, input.kubeletConfigs, (kc, pool) => generateKubeletFiles(kc, pool, baseFile(pool, baseConfigs, KUBELET_CONF_PATH)));
  perPool(KIND_CONTAINER_RUNTIME_CONFIG, input.containerRuntimeConfigs, (cr, pool) => generateContainerRuntimeFiles(cr, baseFile(pool, baseConfigs, STORAGE_CONF_PATH)));

  // The registries: MCO's built-in pools only (custom pools render worker's), owned by Image/cluster.
  const imagePolicies = input.clusterImagePolicies ?? [];
  if (input.image || input.mirrorSets.length > 0 || imagePolicies.length > 0) {
    const imageObject = `${KIND_IMAGE}/${CLUSTER_IMAGE}`;
    const sorted = [...input.mirrorSets].sort(byName);
    const byKind = (kind: string): MirrorSetObject[] => sorted.filter((m) => m.kind === kind);
    const located: LocatedMirrorRule[] = [];
    for (const m of sorted) {
      const list = m.kind === KIND_IMAGE_DIGEST_MIRROR_SET ? 'imageDigestMirrors' : m.kind === KIND_IMAGE_TAG_MIRROR_SET ? 'imageTagMirrors' : 'repositoryDigestMirrors';
      m.rules.forEach((r, i) => located.push({ ...r, object: `${m.kind}/${m.metadata.name}`, field: `spec.${list}[${i}]` }));
    }
    const sources = input.image?.spec.registrySources ?? {};
    // Without the Image config, the other registries sources hold what they make together.
    const others = [...sorted, ...[...imagePolicies].sort(byName)];
    const owners = input.image
      ? [ownerRef(CONFIG_API_VERSION, KIND_IMAGE, CLUSTER_IMAGE, true)]
      : others.map((m) => ownerRef(m.apiVersion, m.kind, m.metadata.name, false));
    const problems = registriesProblems({ object: imageObject, sources }, located);
    const wanted: MachineConfig[] = [];
    if (problems.length === 0) {
      const scopePolicies = clusterScopePolicies(imagePolicies);
      const rules = { registrySources: sources, digestMirrors: byKind(KIND_IMAGE_DIGEST_MIRROR_SET).flatMap((m) => m.rules), tagMirrors: byKind(KIND_IMAGE_TAG_MIRROR_SET).flatMap((m) => m.rules), icspMirrors: byKind(KIND_IMAGE_CONTENT_SOURCE_POLICY).flatMap((m) => m.rules), scopePolicies };
      for (const pool of input.pools.filter(isBuiltInPool)) {
        try {
          const files = generateRegistriesFiles({ registriesConf: baseFile(pool, baseConfigs, REGISTRIES_CONF_PATH), policyJson: baseFile(pool, baseConfigs, POLICY_JSON_PATH) }, rules, imageObject);
          addSigstoreRegistries(files, [...scopePolicies.keys()], imagePolicies);
          wanted.push(generatedMachineConfig(`99-${pool.metadata.name}-generated-registries`, pool.metadata.name, files, owners));
        } catch (err) {
          problems.push(...problemsOf(err));
        }
      }
    }
    // The registries sources share one outcome: each is told every problem (each names its
    // object), and the generated configs are held by the Image config, else the first mirror set.
    // On failure the registries configs in place stay: a broken mirror set must not strip the
    // mirrors nodes use now.
    const holder = input.image ? ([KIND_IMAGE, CLUSTER_IMAGE] as const) : ([others[0]!.kind, others[0]!.metadata.name] as const);
    for (const m of [...(input.image ? [[KIND_IMAGE, CLUSTER_IMAGE]] : []), ...others.map((x) => [x.kind, x.metadata.name])] as [string, string][]) {
      statusFor(m[0], m[1]).problems.push(...problems);
    }
    statusFor(holder[0], holder[1]).wanted = problems.length === 0 ? wanted : existing.filter((mc) => /^99-.*-generated-registries$/.test(mc.metadata.name));
  }

  // CRIOCredentialProviderConfig: `97-<pool>-generated-credentialproviderconfig` for each built-in
  // pool, written even with no file (MCO's syncIgnitionConfig does), owned by the config.
  const credentialProvider = input.crioCredentialProviderConfig;
  if (credentialProvider) {
    const status = statusFor(KIND_CRIO_CREDENTIAL_PROVIDER_CONFIG, credentialProvider.metadata.name);
    for (const pool of input.pools.filter(isBuiltInPool)) {
      const platformFiles = new Map<string, string>();
      for (const path of PLATFORM_CREDENTIAL_PROVIDER_CONFIG_PATHS) {
        const text = baseFile(pool, baseConfigs, path);
        if (text !== undefined) platformFiles.set(path, text);
      }
      try {
        const { files, overlapped } = generateCredentialProviderFiles(credentialProvider, platformFiles);
        for (const image of overlapped) if (!status.overlapped.includes(image)) status.overlapped.push(image);
        status.wanted.push(generatedMachineConfig(`97-${pool.metadata.name}-generated-credentialproviderconfig`, pool.metadata.name, files, [ownerRef(CONFIG_API_VERSION, KIND_CRIO_CREDENTIAL_PROVIDER_CONFIG, credentialProvider.metadata.name, false)]));
      } catch (err) {
        // The pool's own credential provider config is what is broken, not this object's spec.
        status.problems.push({ object: `${KIND_CRIO_CREDENTIAL_PROVIDER_CONFIG}/${credentialProvider.metadata.name}`, field: 'spec', rule: 'base-config-syntax', message: `pool ${pool.metadata.name}'s ${(err as Error).message}` });
      }
    }
  }

  for (const s of pending.values()) {
    const wanted = s.problems.length === 0 || REGISTRIES_KINDS.has(s.kind)
      ? s.wanted
      : [...s.wanted, ...ownedBy(s.kind, s.name).filter((mc) => !s.wanted.some((w) => w.metadata.name === mc.metadata.name))];
    out.push(...wanted);
    statuses.push({ object: `${s.kind}/${s.name}`, conditions: sourceConditions(s.kind, s.problems, s.overlapped), generated: wanted.map((mc) => mc.metadata.name).sort(), problems: s.problems });
  }
  // One generated config per name (two sources cannot both own one; the first wins).
  const seen = new Set<string>();
  return { configs: out.filter((mc) => (seen.has(mc.metadata.name) ? false : (seen.add(mc.metadata.name), true))), statuses };
}

/** Any of the higher-level config objects, as stored. */
export type SourceObject = KubeletConfig | ContainerRuntimeConfig | ImageConfig | MirrorSetObject | ClusterImagePolicy | CrioCredentialProviderConfig | PinnedImageSet;
export function isSourceKind(kind: unknown): kind is SourceKind {
  return (SOURCE_KINDS as readonly unknown[]).includes(kind);
}

/** Validates a document of one of SOURCE_KINDS with its catalogue entry's parser; every problem goes into `c`. */
export function parseSourceObject(doc: Record<string, unknown>, c: ProblemCollector): SourceObject | undefined {
  // A kind outside SOURCE_KINDS is refused by the mirror sets' parser, as it always was.
  const parse = isSourceKind(doc.kind) ? API_KINDS[doc.kind].parse : parseMirrorSet;
  return parse(doc, c) as SourceObject | undefined;
}

/** The input of desiredGeneratedConfigs from stored source objects (KubeletConfigs in creation order). */
export function sourcesInput(objects: readonly { value: SourceObject; createdAt: number }[]): Pick<GeneratedConfigsInput, 'kubeletConfigs' | 'containerRuntimeConfigs' | 'image' | 'mirrorSets' | 'clusterImagePolicies' | 'crioCredentialProviderConfig'> {
  const ordered = [...objects].sort((a, b) => a.createdAt - b.createdAt || (a.value.metadata.name < b.value.metadata.name ? -1 : 1)).map((o) => o.value);
  const image = ordered.find((o): o is ImageConfig => o.kind === KIND_IMAGE);
  const credentialProvider = ordered.find((o): o is CrioCredentialProviderConfig => o.kind === KIND_CRIO_CREDENTIAL_PROVIDER_CONFIG);
  return {
    ...(credentialProvider ? { crioCredentialProviderConfig: credentialProvider } : {}),
    kubeletConfigs: ordered.filter((o): o is KubeletConfig => o.kind === KIND_KUBELET_CONFIG),
    containerRuntimeConfigs: ordered.filter((o): o is ContainerRuntimeConfig => o.kind === KIND_CONTAINER_RUNTIME_CONFIG),
    ...(image ? { image } : {}),
    mirrorSets: ordered.filter((o): o is MirrorSetObject => o.kind === KIND_IMAGE_DIGEST_MIRROR_SET || o.kind === KIND_IMAGE_TAG_MIRROR_SET || o.kind === KIND_IMAGE_CONTENT_SOURCE_POLICY),
    clusterImagePolicies: ordered.filter((o): o is ClusterImagePolicy => o.kind === KIND_CLUSTER_IMAGE_POLICY),
  };
}
