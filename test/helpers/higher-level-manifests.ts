// The higher-level sources the CLI tests send (KubeletConfig, ContainerRuntimeConfig, the ubi
// ImageDigestMirrorSet) and the base MachineConfig they are generated from. Shared because the
// offline render (mcctl render) and the server (mcctl apply) must be shown the same documents:
// written out twice they drifted apart in form while meaning the same thing.

export const b64 = (s: string): string => Buffer.from(s).toString('base64');

/** worker's 01-worker-kubelet: the kubelet.conf and registries.conf the generators start from. */
export function kubeletBaseConfig(kubeletConf = 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 250\n'): string {
  return `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 01-worker-kubelet, labels: {machineconfiguration.openshift.io/role: worker}}
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
        - {path: /etc/kubernetes/kubelet.conf, contents: {source: "data:;base64,${b64(kubeletConf)}"}}
        - {path: /etc/containers/registries.conf, contents: {source: "data:;base64,${b64('unqualified-search-registries = ["docker.io"]\n')}"}}
`;
}

/** A source of `kind` selecting `pool` by MCO's pools.operator label, `spec` (flow YAML) under `field`. */
const poolSource = (kind: string, field: string, name: string, pool: string, spec: string): string => `---
apiVersion: machineconfiguration.openshift.io/v1
kind: ${kind}
metadata: {name: ${name}}
spec:
  machineConfigPoolSelector: {matchLabels: {pools.operator.machineconfiguration.openshift.io/${pool}: ""}}
  ${field}: ${spec}
`;

/** A KubeletConfig for `pool` setting maxPods. */
export const kubeletConfigYaml = (name: string, pool: string, maxPods: number): string => poolSource('KubeletConfig', 'kubeletConfig', name, pool, `{maxPods: ${maxPods}}`);

/** A ContainerRuntimeConfig for `pool` with `spec` as its containerRuntimeConfig. */
export const containerRuntimeConfigYaml = (name: string, pool: string, spec: string): string => poolSource('ContainerRuntimeConfig', 'containerRuntimeConfig', name, pool, spec);

/** ImageDigestMirrorSet ubi: registry.access.redhat.com/ubi9 mirrored at mirror.example.com/ubi9. */
export const UBI_MIRROR_SET = `---
apiVersion: config.openshift.io/v1
kind: ImageDigestMirrorSet
metadata: {name: ubi}
spec:
  imageDigestMirrors: [{source: registry.access.redhat.com/ubi9, mirrors: [mirror.example.com/ubi9]}]
`;
