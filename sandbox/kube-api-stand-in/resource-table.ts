// The resources the Kubernetes API stand-in serves: what mcplane uses, no more. Each entry is
// what the real apiserver's discovery says about it (group, version, plural, kind, scope,
// subresources), so URLs, RBAC checks and the request log name resources as Kubernetes does.

export interface ResourceType {
  group: string; // '' for the core group
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
  /** Has a status subresource: the main resource ignores status, /status changes only status. */
  status: boolean;
  /** A CustomResourceDefinition (create drops status when the status subresource is on). */
  custom: boolean;
  /**
   * A CRD's structural schema: the spec fields it declares. The apiserver prunes any other
   * spec field on create, update and patch (MCO's CRDs, as of OpenShift 4.16).
   */
  specFields?: readonly string[];
}

export const STAND_IN_RESOURCES: readonly ResourceType[] = [
  { group: '', version: 'v1', plural: 'nodes', kind: 'Node', namespaced: false, status: true, custom: false },
  { group: '', version: 'v1', plural: 'pods', kind: 'Pod', namespaced: true, status: true, custom: false },
  { group: '', version: 'v1', plural: 'events', kind: 'Event', namespaced: true, status: false, custom: false },
  { group: 'policy', version: 'v1', plural: 'poddisruptionbudgets', kind: 'PodDisruptionBudget', namespaced: true, status: true, custom: false },
  {
    group: 'machineconfiguration.openshift.io', version: 'v1', plural: 'machineconfigs', kind: 'MachineConfig', namespaced: false, status: false, custom: true,
    specFields: ['baseOSExtensionsContainerImage', 'config', 'extensions', 'fips', 'kernelArguments', 'kernelType', 'osImageURL'],
  },
  {
    group: 'machineconfiguration.openshift.io', version: 'v1', plural: 'machineconfigpools', kind: 'MachineConfigPool', namespaced: false, status: true, custom: true,
    specFields: ['configuration', 'machineConfigSelector', 'maxUnavailable', 'nodeSelector', 'paused', 'pinnedImageSets'],
  },
  // MCO's higher-level configs and the registries sources (mcctl import reads them).
  { group: 'machineconfiguration.openshift.io', version: 'v1', plural: 'kubeletconfigs', kind: 'KubeletConfig', namespaced: false, status: true, custom: true },
  { group: 'machineconfiguration.openshift.io', version: 'v1', plural: 'pinnedimagesets', kind: 'PinnedImageSet', namespaced: false, status: true, custom: true, specFields: ['pinnedImages'] },
  { group: 'machineconfiguration.openshift.io', version: 'v1', plural: 'containerruntimeconfigs', kind: 'ContainerRuntimeConfig', namespaced: false, status: true, custom: true },
  { group: 'config.openshift.io', version: 'v1', plural: 'images', kind: 'Image', namespaced: false, status: true, custom: true },
  { group: 'config.openshift.io', version: 'v1', plural: 'imagedigestmirrorsets', kind: 'ImageDigestMirrorSet', namespaced: false, status: true, custom: true },
  { group: 'config.openshift.io', version: 'v1', plural: 'imagetagmirrorsets', kind: 'ImageTagMirrorSet', namespaced: false, status: true, custom: true },
  { group: 'operator.openshift.io', version: 'v1alpha1', plural: 'imagecontentsourcepolicies', kind: 'ImageContentSourcePolicy', namespaced: false, status: false, custom: true },
  { group: 'config.openshift.io', version: 'v1', plural: 'clusterimagepolicies', kind: 'ClusterImagePolicy', namespaced: false, status: true, custom: true },
  { group: 'config.openshift.io', version: 'v1', plural: 'criocredentialproviderconfigs', kind: 'CRIOCredentialProviderConfig', namespaced: false, status: true, custom: true },
  // MCO's per-node status (OpenShift 4.19+); served only when a test asks for its CRD
  // (machineConfigNodeCrd), as a cluster without it answers 404.
  {
    group: 'machineconfiguration.openshift.io', version: 'v1', plural: 'machineconfignodes', kind: 'MachineConfigNode', namespaced: false, status: true, custom: true,
    specFields: ['configImage', 'configVersion', 'node', 'pool'],
  },
];

/** Resources whose CRD a cluster may lack: the stand-in serves them only when asked to. */
export const OPTIONAL_RESOURCES: readonly string[] = ['machineconfignodes'];

export function apiVersionOf(type: ResourceType): string {
  return type.group ? `${type.group}/${type.version}` : type.version;
}

export function resourceByPath(group: string, version: string, plural: string): ResourceType | undefined {
  return STAND_IN_RESOURCES.find((r) => r.group === group && r.version === version && r.plural === plural);
}

export function resourceByKind(apiVersion: string, kind: string): ResourceType | undefined {
  return STAND_IN_RESOURCES.find((r) => apiVersionOf(r) === apiVersion && r.kind === kind);
}
