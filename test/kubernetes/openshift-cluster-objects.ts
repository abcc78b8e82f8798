// MachineConfigs and MachineConfigPools shaped as `oc get mc,mcp -o json` prints them on an
// OpenShift 4.x cluster: server metadata (uid, resourceVersion, generation, managedFields,
// ownerReferences), MCO's own generated configs (00-worker with its controller-version
// annotation, 99-worker-ssh, the registries config), rendered-* configs, pools carrying MCO's
// status (certExpirys, poolSynchronizersStatus, conditions) and spec.configuration, and a
// user's chrony config (the project's example) as the apiserver stores it (mode 0644 -> 420).

const MCO = 'machineconfiguration.openshift.io';
const API = `${MCO}/v1`;
const CONTROLLER_VERSION = 'b3f3c3d4e1c6a1d0f0c9a8e3d4f5a6b7c8d9e0f1';
const RENDERED_WORKER = 'rendered-worker-6f6a6c1b0cd1d8f9e3a1b2c3d4e5f607';
const RENDERED_MASTER = 'rendered-master-0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d';

const b64 = (s: string): string => `data:text/plain;charset=utf-8;base64,${Buffer.from(s).toString('base64')}`;

function managedFields(manager: string): unknown[] {
  return [{ apiVersion: API, fieldsType: 'FieldsV1', fieldsV1: { 'f:spec': { '.': {} } }, manager, operation: 'Update', time: '2024-03-11T09:12:41Z' }];
}

function generatedBy(): Record<string, unknown> {
  return {
    annotations: { [`${MCO}/generated-by-controller-version`]: CONTROLLER_VERSION },
    ownerReferences: [{ apiVersion: `${MCO}/v1`, blockOwnerDeletion: true, controller: true, kind: 'ControllerConfig', name: 'machine-config-controller', uid: '1a2b3c4d-0000-4000-8000-000000000001' }],
    managedFields: managedFields('machine-config-controller'),
  };
}

/** An MCO-generated base config, as 00-worker looks (much shortened, same fields). */
export function mcoBaseConfig(role: 'worker' | 'master'): Record<string, any> {
  return {
    apiVersion: API, kind: 'MachineConfig',
    metadata: { name: `00-${role}`, labels: { [`${MCO}/role`]: role }, creationTimestamp: '2024-03-11T09:12:41Z', ...generatedBy() },
    spec: {
      baseOSExtensionsContainerImage: '',
      config: {
        ignition: { version: '3.4.0' },
        storage: {
          files: [
            { contents: { source: b64('[crio.runtime]\nselinux = true\n') }, mode: 420, overwrite: true, path: '/etc/crio/crio.conf.d/00-default' },
            { contents: { source: 'data:,%5Bmain%5D%0Aplugins%3Dkeyfile%0A' }, mode: 420, overwrite: true, path: '/etc/NetworkManager/conf.d/99-keyfiles.conf' },
            { contents: { source: b64('#!/bin/bash\nset -eu\necho configure-ovs\n') }, mode: 493, overwrite: true, path: '/usr/local/bin/configure-ovs.sh' },
          ],
        },
        systemd: {
          units: [
            { contents: '[Unit]\nDescription=Kubernetes Kubelet\n[Service]\nExecStart=/usr/bin/kubelet\n[Install]\nWantedBy=multi-user.target\n', enabled: true, name: 'kubelet.service' },
            { dropins: [{ contents: '[Service]\nEnvironment="ENABLE_PROFILE_UNIX_SOCKET=true"\n', name: '10-mco-profile-unix-socket.conf' }], name: 'crio.service' },
          ],
        },
      },
      extensions: null,
      fips: false,
      kernelArguments: null,
      kernelType: '',
      osImageURL: 'quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0b3c1f0e5e0c9d1a8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d',
    },
  };
}

export function mcoSshConfig(role: 'worker' | 'master'): Record<string, any> {
  return {
    apiVersion: API, kind: 'MachineConfig',
    metadata: { name: `99-${role}-ssh`, labels: { [`${MCO}/role`]: role }, creationTimestamp: '2024-03-11T09:05:12Z', managedFields: managedFields('cluster-bootstrap') },
    spec: {
      baseOSExtensionsContainerImage: '', extensions: null, fips: false, kernelArguments: null, kernelType: '', osImageURL: '',
      config: { ignition: { version: '3.2.0' }, passwd: { users: [{ name: 'core', sshAuthorizedKeys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG2yWv0 admin@example.com'] }] } },
    },
  };
}

export function mcoRegistriesConfig(): Record<string, any> {
  return {
    apiVersion: API, kind: 'MachineConfig',
    metadata: { name: '99-worker-generated-registries', labels: { [`${MCO}/role`]: 'worker' }, ...generatedBy() },
    spec: {
      config: { ignition: { version: '3.4.0' }, storage: { files: [{ contents: { source: 'data:text/plain,unqualified-search-registries%20%3D%20%5B%22registry.access.redhat.com%22%5D%0A' }, mode: 420, overwrite: true, path: '/etc/containers/registries.conf' }] } },
      extensions: null, fips: false, kernelArguments: null, kernelType: '', osImageURL: '',
    },
  };
}

/** The project's chrony example as the apiserver stores it after `oc apply -f` (JSON; 0644 -> 420). */
export function userChronyConfig(): Record<string, any> {
  return {
    apiVersion: API, kind: 'MachineConfig',
    metadata: {
      name: '50-examplecorp-chrony', labels: { [`${MCO}/role`]: 'worker' },
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig","metadata":{"annotations":{},"labels":{"machineconfiguration.openshift.io/role":"worker"},"name":"50-examplecorp-chrony"},"spec":{}}\n' },
      managedFields: managedFields('kubectl-client-side-apply'),
    },
    spec: {
      config: {
        ignition: { version: '2.2.0' },
        storage: { files: [{ contents: { source: b64('server foo.example.net maxdelay 0.4 offline\nserver bar.example.net maxdelay 0.4 offline\nserver baz.example.net maxdelay 0.4 offline\n') }, filesystem: 'root', mode: 420, path: '/etc/chrony.conf' }] },
      },
    },
  };
}

/** MCO's output, which mcplane must skip: it renders its own. */
export function mcoRenderedConfig(role: 'worker' | 'master'): Record<string, any> {
  return {
    apiVersion: API, kind: 'MachineConfig',
    metadata: {
      name: role === 'worker' ? RENDERED_WORKER : RENDERED_MASTER,
      annotations: { [`${MCO}/generated-by-controller-version`]: CONTROLLER_VERSION, [`${MCO}/release-image-version`]: '4.15.3' },
      ownerReferences: [{ apiVersion: API, blockOwnerDeletion: true, controller: true, kind: 'MachineConfigPool', name: role, uid: '1a2b3c4d-0000-4000-8000-000000000002' }],
    },
    spec: { config: { ignition: { version: '3.4.0' } }, extensions: [], fips: false, kernelArguments: [], kernelType: 'default', osImageURL: '' },
  };
}

function condition(type: string, status: string, reason = '', message = ''): Record<string, string> {
  return { lastTransitionTime: '2024-03-11T09:15:21Z', message, reason, status, type };
}

/** A built-in pool as MCO leaves it: spec.configuration, labels, and a full status. */
export function mcoPool(role: 'worker' | 'master'): Record<string, any> {
  const rendered = role === 'worker' ? RENDERED_WORKER : RENDERED_MASTER;
  const sources = [`00-${role}`, `99-${role}-ssh`].map((name) => ({ apiVersion: API, kind: 'MachineConfig', name }));
  return {
    apiVersion: API, kind: 'MachineConfigPool',
    metadata: {
      name: role, creationTimestamp: '2024-03-11T09:05:10Z',
      labels: { [`${MCO}/mco-built-in`]: '', [`pools.operator.${MCO}/${role}`]: '' },
      managedFields: managedFields('machine-config-operator'),
    },
    spec: {
      configuration: { name: rendered, source: sources },
      machineConfigSelector: { matchLabels: { [`${MCO}/role`]: role } },
      nodeSelector: { matchLabels: { [`node-role.kubernetes.io/${role}`]: '' } },
      paused: false,
    },
    status: {
      certExpirys: [{ bundle: 'KubeAPIServerServingCAData', expiry: '2034-03-09T08:57:45Z', subject: 'CN=admin-kubeconfig-signer,OU=openshift' }],
      conditions: [
        condition('RenderDegraded', 'False'),
        condition('Updated', 'True', '', `All nodes are updated with MachineConfig ${rendered}`),
        condition('Updating', 'False'),
        condition('NodeDegraded', 'False'),
        condition('Degraded', 'False'),
      ],
      configuration: { name: rendered, source: sources },
      degradedMachineCount: 0, machineCount: 3, observedGeneration: 2, readyMachineCount: 3, unavailableMachineCount: 0, updatedMachineCount: 3,
      poolSynchronizersStatus: [{ availableMachineCount: 3, degradedMachineCount: 0, machineCount: 3, observedGeneration: 2, poolSynchronizerType: 'PinnedImageSets', readyMachineCount: 3, unavailableMachineCount: 0, updatedMachineCount: 3 }],
    },
  };
}

/** The project's infra example pool, applied to the cluster by a user. */
export function userInfraPool(): Record<string, any> {
  return {
    apiVersion: API, kind: 'MachineConfigPool',
    metadata: { name: 'infra' },
    spec: {
      machineConfigSelector: { matchExpressions: [{ key: `${MCO}/role`, operator: 'In', values: ['worker', 'infra'] }] },
      nodeSelector: { matchLabels: { 'node-role.kubernetes.io/infra': '' } },
      paused: false,
    },
  };
}

/** A whole cluster's MachineConfigs and pools, as a fresh OpenShift install plus a user's changes has them. */
export function openshiftClusterObjects(): Record<string, any>[] {
  return [
    mcoPool('master'), mcoPool('worker'), userInfraPool(),
    mcoBaseConfig('master'), mcoBaseConfig('worker'), mcoSshConfig('master'), mcoSshConfig('worker'), mcoRegistriesConfig(),
    userChronyConfig(), mcoRenderedConfig('master'), mcoRenderedConfig('worker'),
  ];
}
