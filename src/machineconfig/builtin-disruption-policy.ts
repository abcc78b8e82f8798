// MCO's built-in node disruption policies, in force without any MachineConfiguration and
// overridable by one (an entry for the same path or unit replaces the built-in, as MCO's
// MergeClusterPolicies does). Followed: machine-config-operator 7ff337a4
// pkg/apihelpers/apihelpers.go defaultClusterPolicies, with the paths of
// pkg/daemon/constants/constants.go. /etc/containers/registries.conf has MCO's reserved Special
// action: reload crio, and drain unless every change is one MCO knows is safe
// (registries-drain.ts, pkg/daemon/drain.go isSafeContainerRegistryConfChanges).

import { REGISTRIES_CONF_PATH } from './registries-config.ts';
import type { DisruptionAction, DisruptionPolicy } from './types.ts';

const reloadCrio: DisruptionAction = { type: 'reload', unit: 'crio.service' };
const restart = (unit: string): DisruptionAction => ({ type: 'restart', unit });
const none: DisruptionAction = { type: 'none' };

/** The Special action's entry: registries.conf changes reload crio; the drain is decided per change. */
export const REGISTRIES_SPECIAL_ACTIONS: DisruptionAction[] = [reloadCrio];

/** defaultClusterPolicies, in MCO's order. */
export const BUILTIN_DISRUPTION_POLICY: Required<DisruptionPolicy> = {
  files: [
    { path: '/var/lib/kubelet/config.json', actions: [none] },
    { path: '/etc/machine-config-daemon/no-reboot/containers-gpg.pub', actions: [reloadCrio] },
    { path: '/etc/containers/policy.json', actions: [reloadCrio] },
    { path: REGISTRIES_CONF_PATH, actions: REGISTRIES_SPECIAL_ACTIONS },
    { path: '/etc/containers/registries.d', actions: [reloadCrio] },
    { path: '/etc/crio/policies', actions: [reloadCrio] },
    { path: '/etc/nmstate/openshift', actions: [none] },
    { path: '/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt', actions: [restart('coreos-update-ca-trust.service'), restart('crio.service')] },
    { path: '/etc/kubernetes/credential-providers', actions: [restart('kubelet.service')] },
    { path: '/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf', actions: [{ type: 'daemon-reload' }, restart('kubelet.service')] },
    { path: '/etc/iri-registry', actions: [restart('iri-registry.service')] },
    { path: '/usr/local/bin/load-registry-image.sh', actions: [restart('iri-registry.service')] },
    { path: '/etc/pki/ca-trust/source/anchors/iri-root-ca.crt', actions: [restart('coreos-update-ca-trust.service')] },
  ],
  units: [
    { name: 'iri-registry.service', actions: [{ type: 'daemon-reload' }, restart('iri-registry.service')] },
  ],
  sshkey: { actions: [none] },
};

/** The policy in force: MCO's built-ins with `policy`'s entries over them (same path or unit replaces). */
export function withBuiltinPolicy(policy: DisruptionPolicy | undefined): DisruptionPolicy & { builtin: { files: Set<string>; units: Set<string>; sshkey: boolean } } {
  const userPaths = new Set((policy?.files ?? []).map((f) => f.path));
  const userUnits = new Set((policy?.units ?? []).map((u) => u.name));
  const files = [...BUILTIN_DISRUPTION_POLICY.files.filter((f) => !userPaths.has(f.path)), ...(policy?.files ?? [])];
  const units = [...BUILTIN_DISRUPTION_POLICY.units.filter((u) => !userUnits.has(u.name)), ...(policy?.units ?? [])];
  return {
    files, units, sshkey: policy?.sshkey ?? BUILTIN_DISRUPTION_POLICY.sshkey,
    builtin: {
      files: new Set(BUILTIN_DISRUPTION_POLICY.files.filter((f) => !userPaths.has(f.path)).map((f) => f.path)),
      units: new Set(BUILTIN_DISRUPTION_POLICY.units.filter((u) => !userUnits.has(u.name)).map((u) => u.name)),
      sshkey: !policy?.sshkey,
    },
  };
}
