// Every API kind mcplane serves, in one catalogue: its group/version, plural and short names,
// parser, who writes it, how it is deleted and whether `mcctl import` (and --kubernetes-source)
// takes it from a cluster. Most kinds are stored objects someone writes; a derived kind
// (MachineConfigNode) is built by the control plane from its records on every read, so it has
// no parser, no store entry and no delete rule, and import compares it rather than storing it. The control plane's stored kinds, the higher-level configs'
// SOURCE_KINDS, the cluster resources import reads, the delete dispatch and mcctl's resource
// names are derived from here, so adding a kind is one entry plus its parser.
// test/machineconfig/api-kinds.test.ts fails when a list of kinds is written anywhere else.

import { parseContainerRuntimeConfig, type ContainerRuntimeConfig } from './container-runtime-config.ts';
import { parseCrioCredentialProviderConfig, type CrioCredentialProviderConfig } from './crio-credential-provider.ts';
import { parseImageConfig, parseMirrorSet, type ImageConfig, type MirrorSetObject } from './image-config.ts';
import { parseClusterImagePolicy, type ClusterImagePolicy } from './image-policy.ts';
import { parseKubeletConfig, type KubeletConfig } from './kubelet-config.ts';
import { parseMachineConfig } from './machine-config.ts';
import { parseMachineConfigPool } from './machine-config-pool.ts';
import { parseMachineConfiguration } from './machine-configuration.ts';
import { parsePinnedImageSet, type PinnedImageSet } from './pinned-image-set.ts';
import type { ContentsBudget } from './contents-budget.ts';
import type { ProblemCollector } from './problem-collector.ts';

/**
 * How `mcctl delete` removes an object of the kind:
 * - config: a MachineConfig; its pools re-render.
 * - pool: a MachineConfigPool; the built-in master and worker pools are refused.
 * - source: a higher-level config; its generated MachineConfigs go with it.
 * - singleton: the one object of the kind (MachineConfiguration/cluster).
 * - node: a host's records, its certificate revoked.
 */
export type DeleteRule = 'config' | 'pool' | 'source' | 'singleton' | 'node';

export type Parser<T> = (doc: Record<string, unknown>, c: ProblemCollector, budget?: ContentsBudget) => T | undefined;

export interface ApiKindInfo {
  readonly group: string;
  readonly version: string;
  /** The resource name a Kubernetes API server serves it under (and mcctl's plural). */
  readonly plural: string;
  /** kubectl's short names (`oc get mc`). */
  readonly shortNames: readonly string[];
  /**
   * Who writes it: the user through Apply, the stream holder for an agent's host, or the control
   * plane, which derives it from what the agents report (not stored).
   */
  readonly writer: 'user' | 'stream holder' | 'control plane';
  /** What it holds (the store's registry shows it). */
  readonly holds: string;
  /** Validates a document of the kind; none for kinds no user writes. */
  readonly parse?: Parser<unknown>;
  /** None for a derived kind: there is nothing stored to delete (its node is deleted instead). */
  readonly deleteRule?: DeleteRule;
  /**
   * true: `mcctl import` and --kubernetes-source read it from a cluster and apply it.
   * 'compared': `mcctl import` reads the cluster's objects and reports each against mcplane's own
   * (a derived kind: the cluster's status is MCO's, not something mcplane could store as its own).
   */
  readonly imported: boolean | 'compared';
  /**
   * Not stored: the control plane derives every object of the kind from its records when it is
   * read (ListMachineConfigNodes), so it is never applied, stored, cached or deleted.
   */
  readonly derived?: true;
  /**
   * Stored, listed (ListSourceObjects), imported and deleted as an object of its own: a
   * higher-level config the generator makes MachineConfigs of (generated-configs.ts), or a
   * PinnedImageSet, which the generator ignores and the assignment carries to the agents.
   */
  readonly source?: true;
  /** Its objects make the registries config (registries.conf, policy.json) together, and share its outcome. */
  readonly registries?: true;
  /**
   * mcctl's own name for the resource `mcctl get` lists the kind under, where it is not the
   * plural (the higher-level configs are listed under theirs); none for MachineConfiguration,
   * which is deleted but not listed.
   */
  readonly mcctlName?: string;
}

const MCO = 'machineconfiguration.openshift.io';
const CONFIG = 'config.openshift.io';

// Order matters where it shows: error messages, the import's order and mcctl's resource list.
export const API_KINDS = {
  MachineConfig: { group: MCO, version: 'v1', plural: 'machineconfigs', shortNames: ['mc'], mcctlName: 'mc', writer: 'user', holds: 'a MachineConfig', parse: parseMachineConfig, deleteRule: 'config', imported: true },
  MachineConfigPool: { group: MCO, version: 'v1', plural: 'machineconfigpools', shortNames: ['mcp'], mcctlName: 'pools', writer: 'user', holds: 'a MachineConfigPool', parse: parseMachineConfigPool, deleteRule: 'pool', imported: true },
  MachineConfiguration: { group: 'operator.openshift.io', version: 'v1', plural: 'machineconfigurations', shortNames: [], writer: 'user', holds: 'MachineConfiguration/cluster: the cluster-wide node disruption policy (MCO\'s object)', parse: parseMachineConfiguration, deleteRule: 'singleton', imported: false },
  Node: { group: '', version: 'v1', plural: 'nodes', shortNames: ['no'], mcctlName: 'nodes', writer: 'stream holder', holds: 'a host\'s identity: labels, registration time, the role it was enrolled for, its certificate', deleteRule: 'node', imported: false },
  // The user's higher-level configs (MCO's): the leader's generated-config controller makes
  // MachineConfigs of them.
  KubeletConfig: { group: MCO, version: 'v1', plural: 'kubeletconfigs', shortNames: [], writer: 'user', holds: 'a KubeletConfig', parse: parseKubeletConfig as Parser<KubeletConfig>, deleteRule: 'source', imported: true, source: true },
  ContainerRuntimeConfig: { group: MCO, version: 'v1', plural: 'containerruntimeconfigs', shortNames: ['ctrcfg'], writer: 'user', holds: 'a ContainerRuntimeConfig', parse: parseContainerRuntimeConfig as Parser<ContainerRuntimeConfig>, deleteRule: 'source', imported: true, source: true },
  Image: { group: CONFIG, version: 'v1', plural: 'images', shortNames: [], writer: 'user', holds: 'the cluster Image config (config.openshift.io/v1): registry sources', parse: parseImageConfig as Parser<ImageConfig>, deleteRule: 'source', imported: true, source: true, registries: true },
  ImageDigestMirrorSet: { group: CONFIG, version: 'v1', plural: 'imagedigestmirrorsets', shortNames: ['idms'], writer: 'user', holds: 'an ImageDigestMirrorSet', parse: parseMirrorSet as Parser<MirrorSetObject>, deleteRule: 'source', imported: true, source: true, registries: true },
  ImageTagMirrorSet: { group: CONFIG, version: 'v1', plural: 'imagetagmirrorsets', shortNames: ['itms'], writer: 'user', holds: 'an ImageTagMirrorSet', parse: parseMirrorSet as Parser<MirrorSetObject>, deleteRule: 'source', imported: true, source: true, registries: true },
  ImageContentSourcePolicy: { group: 'operator.openshift.io', version: 'v1alpha1', plural: 'imagecontentsourcepolicies', shortNames: ['icsp'], writer: 'user', holds: 'an ImageContentSourcePolicy (operator.openshift.io/v1alpha1)', parse: parseMirrorSet as Parser<MirrorSetObject>, deleteRule: 'source', imported: true, source: true, registries: true },
  ClusterImagePolicy: { group: CONFIG, version: 'v1', plural: 'clusterimagepolicies', shortNames: [], writer: 'user', holds: 'a ClusterImagePolicy: sigstore signature verification for image scopes', parse: parseClusterImagePolicy as Parser<ClusterImagePolicy>, deleteRule: 'source', imported: true, source: true, registries: true },
  // Not made into MachineConfigs: each node's assignment carries its pool's sets (spec.pinnedImageSets),
  // and the agent pulls and pins their images. MCO's CRD has no short name.
  PinnedImageSet: { group: MCO, version: 'v1', plural: 'pinnedimagesets', shortNames: [], writer: 'user', holds: 'a PinnedImageSet: images a pool\'s nodes pull ahead of time and pin', parse: parsePinnedImageSet as Parser<PinnedImageSet>, deleteRule: 'source', imported: true, source: true },
  // MCO's per-node update status (GA in OpenShift 4.19): made from the node's records and its
  // agent's reports on every read (machine-config-node.ts), served by ListMachineConfigNodes,
  // written to a cluster that has the CRD by the machine-config-node controller.
  MachineConfigNode: { group: MCO, version: 'v1', plural: 'machineconfignodes', shortNames: ['mcn'], mcctlName: 'mcn', writer: 'control plane', holds: 'a node\'s update status as MCO\'s MachineConfigNode, derived from the node\'s records', imported: 'compared', derived: true },
  CRIOCredentialProviderConfig: { group: CONFIG, version: 'v1', plural: 'criocredentialproviderconfigs', shortNames: [], writer: 'user', holds: 'the CRIOCredentialProviderConfig: images whose credentials the kubelet asks CRI-O for', parse: parseCrioCredentialProviderConfig as Parser<CrioCredentialProviderConfig>, deleteRule: 'source', imported: true, source: true },
} as const satisfies Record<string, ApiKindInfo>;

type Catalogue = typeof API_KINDS;
export type ApiKind = keyof Catalogue;

/** The kinds whose entry has `source: true`: the higher-level configs. */
export type SourceKind = { [K in ApiKind]: Catalogue[K] extends { source: true } ? K : never }[ApiKind];
/** The kinds the user writes. */
export type UserKind = { [K in ApiKind]: Catalogue[K] extends { writer: 'user' } ? K : never }[ApiKind];
/** The kinds the control plane derives (not stored). */
export type DerivedKind = { [K in ApiKind]: Catalogue[K] extends { derived: true } ? K : never }[ApiKind];
/** The kinds a `mcctl` resource name lists (mcctlName), by that name. */
export type McctlName = { [K in ApiKind]: Catalogue[K] extends { mcctlName: infer N extends string } ? N : never }[ApiKind];
/** The kinds read from a cluster and applied. */
export type ImportedKind = { [K in ApiKind]: Catalogue[K] extends { imported: true } ? K : never }[ApiKind];
/** The plural of each higher-level config kind (mcctl's resource names for them). */
export type SourcePlural = Catalogue[SourceKind]['plural'];

export const API_KIND_NAMES = Object.keys(API_KINDS) as ApiKind[];

export function isApiKind(kind: unknown): kind is ApiKind {
  return typeof kind === 'string' && Object.hasOwn(API_KINDS, kind);
}

export function apiKind(kind: ApiKind): ApiKindInfo {
  return API_KINDS[kind];
}

/** `group/version`, or `version` for the core group. */
export function apiVersionOf(kind: ApiKind): string {
  const k: ApiKindInfo = API_KINDS[kind];
  return k.group ? `${k.group}/${k.version}` : k.version;
}

const kindsWhere = <K extends ApiKind>(has: (info: ApiKindInfo) => boolean): K[] => API_KIND_NAMES.filter((k) => has(API_KINDS[k])) as K[];

export const SOURCE_KINDS: readonly SourceKind[] = kindsWhere<SourceKind>((k) => k.source === true);
export const USER_KINDS: readonly UserKind[] = kindsWhere<UserKind>((k) => k.writer === 'user');
export const REGISTRIES_KINDS: readonly SourceKind[] = kindsWhere<SourceKind>((k) => k.registries === true);
export const IMPORTED_KINDS: readonly ImportedKind[] = kindsWhere<ImportedKind>((k) => k.imported === true);
export const DERIVED_KINDS: readonly DerivedKind[] = kindsWhere<DerivedKind>((k) => k.derived === true);
/** The kinds import reads to compare, storing nothing. */
export const COMPARED_KINDS: readonly ApiKind[] = kindsWhere((k) => k.imported === 'compared');

/** kubectl's TYPE of `-o name` (TYPE/NAME): the lower-case kind. */
export function typeNameOf(kind: ApiKind): string {
  return kind.toLowerCase();
}

/** How an unknown-resource message names a kind: its plural, then its short names (`machineconfignodes (mcn)`). */
export function describeNames(kind: ApiKind): string {
  const k: ApiKindInfo = API_KINDS[kind];
  return k.shortNames.length ? `${k.plural} (${k.shortNames.join(', ')})` : k.plural;
}

/** What a user-written kind's parser makes of a document: the object as stored. */
export type ParsedValue<K extends UserKind> = NonNullable<ReturnType<Catalogue[K]['parse']>>;
