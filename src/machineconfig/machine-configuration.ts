// MCO's MachineConfiguration/cluster (operator.openshift.io/v1): the cluster-wide node disruption
// policy. The schema and rules are MCO's (openshift/api operator/v1 types_machineconfiguration.go,
// NodeDisruptionPolicyConfig and its CEL rules), so a YAML an OpenShift cluster already has applies
// unmodified; the policy is kept in mcplane's DisruptionPolicy shape, which the agent acts on.

import { CLUSTER_MACHINE_CONFIGURATION, KIND_MACHINE_CONFIGURATION, OPERATOR_API_VERSION } from './constants.ts';
import { quote } from './control-characters.ts';
import { MAX_POLICY_ACTIONS, parseDisruptionPolicyEntries, unitName } from './disruption-policy-entries.ts';
import { parseObjectMeta } from './object-meta.ts';
import { join, type ProblemCollector } from './problem-collector.ts';
import type { DisruptionAction, MachineConfiguration } from './types.ts';

// The operator fields mcplane does not act on are accepted (and dropped) so that the object as
// `oc get machineconfiguration cluster -o yaml` prints it applies unmodified.
const SPEC_KEYS = [
  'nodeDisruptionPolicy', 'managementState', 'logLevel', 'operatorLogLevel', 'unsupportedConfigOverrides',
  'observedConfig', 'forceRedeploymentReason', 'failedRevisionLimit', 'succeededRevisionLimit',
  'managedBootImages', 'irreconcilableValidationOverrides', 'bootImageSkewEnforcement',
];
const MCO_ACTION_TYPES = ['Reboot', 'Drain', 'Reload', 'Restart', 'DaemonReload', 'None'] as const;

export function parseMachineConfiguration(doc: Record<string, unknown>, c: ProblemCollector): MachineConfiguration | undefined {
  if (doc.apiVersion !== OPERATOR_API_VERSION) {
    c.add('apiVersion', 'api-version', `apiVersion must be "${OPERATOR_API_VERSION}", got ${JSON.stringify(doc.apiVersion ?? null)}`);
  }
  const metadata = parseObjectMeta(doc.metadata, c);
  if (metadata && metadata.name !== CLUSTER_MACHINE_CONFIGURATION) {
    c.add('metadata.name', 'cluster-name', `only the MachineConfiguration named "${CLUSTER_MACHINE_CONFIGURATION}" is read (MCO's rule), got ${quote(metadata.name, 100)}`);
  }
  // `status` (MCO's merged nodeDisruptionPolicyStatus, conditions) is the operator's to write: ignored.
  const rawSpec = c.record(doc.spec, 'spec');
  if (!rawSpec) c.add('spec', 'required', 'spec is required');
  const spec = rawSpec ?? {};
  c.onlyKeys(spec, 'spec', SPEC_KEYS);
  const policy = parseDisruptionPolicyEntries(spec.nodeDisruptionPolicy, c, 'spec.nodeDisruptionPolicy', parseActions);
  if (!c.ok || !metadata) return undefined;
  return { apiVersion: OPERATOR_API_VERSION, kind: KIND_MACHINE_CONFIGURATION, metadata, spec: { nodeDisruptionPolicy: policy } };
}

/** MCO's action list, mapped to mcplane's actions. */
function parseActions(raw: unknown, c: ProblemCollector, field: string): DisruptionAction[] | undefined {
  const list = c.array(raw, field);
  if (!list) {
    if (raw === undefined || raw === null) c.add(field, 'required', `actions are required (${MCO_ACTION_TYPES.join(', ')})`);
    return undefined;
  }
  if (list.length === 0) {
    c.add(field, 'required', `at least one action is required (${MCO_ACTION_TYPES.join(', ')})`);
    return undefined;
  }
  if (list.length > MAX_POLICY_ACTIONS) c.add(field, 'max-items', `at most ${MAX_POLICY_ACTIONS} actions, got ${list.length}`);
  const before = c.problems.length;
  const out: DisruptionAction[] = [];
  const types: string[] = [];
  list.forEach((rawAction, i) => {
    const f = `${field}[${i}]`;
    const a = c.record(rawAction, f);
    if (!a) return;
    c.onlyKeys(a, f, ['type', 'reload', 'restart']);
    const type = c.string(a.type, f, 'type');
    if (type === undefined) {
      if (a.type === undefined || a.type === null) c.add(join(f, 'type'), 'required', `an action needs a type (${MCO_ACTION_TYPES.join(', ')})`);
      return;
    }
    types.push(type);
    // MCO's union rules: reload/restart is required with its type and forbidden with any other.
    for (const key of ['reload', 'restart'] as const) {
      const wanted = key === 'reload' ? 'Reload' : 'Restart';
      if (a[key] !== undefined && type !== wanted) c.add(join(f, key), 'union', `${key} is only allowed when type is ${wanted}, not ${quote(type, 100)}`);
    }
    switch (type) {
      case 'Reboot': out.push({ type: 'reboot' }); break;
      case 'None': out.push({ type: 'none' }); break;
      case 'DaemonReload': out.push({ type: 'daemon-reload' }); break;
      // Drain empties a Kubernetes node of its workloads before the other actions; the control
      // plane drains (with a kubeconfig), and without a cluster it adds nothing. Alone, it covers
      // the change without a reboot.
      case 'Drain': out.push({ type: 'drain' }); break;
      case 'Reload':
      case 'Restart': {
        const key = type === 'Reload' ? 'reload' : 'restart';
        const nested = c.record(a[key], f, key);
        if (!nested) {
          if (a[key] === undefined || a[key] === null) c.add(join(f, key), 'union', `${key} (with serviceName) is required when type is ${type}`);
          return;
        }
        c.onlyKeys(nested, join(f, key), ['serviceName']);
        const unit = unitName(nested.serviceName, c, join(f, `${key}.serviceName`));
        if (unit) out.push({ type: key, unit });
        break;
      }
      case 'Special':
        // MCO's own action for /etc/containers/registries.conf (it decides between a crio reload
        // and a drain from what changed); its API refuses it in a user's policy, and so does mcplane.
        c.add(join(f, 'type'), 'reserved-action', 'Special is reserved for MCO\'s built-in policy (registries.conf) and cannot be set in nodeDisruptionPolicy; use Reload with serviceName crio.service instead');
        break;
      default:
        c.add(join(f, 'type'), 'disruption-action', `action type ${quote(type, 100)} is not one of ${MCO_ACTION_TYPES.join(', ')}`);
    }
  });
  // MCO's CEL rules on every actions list.
  if (types.includes('Reboot') && list.length > 1) c.add(field, 'standalone-action', 'Reboot can only be specified alone, as it overrides every other action');
  if (types.includes('None') && list.length > 1) c.add(field, 'standalone-action', 'None can only be specified alone, as it overrides every other action');
  return c.problems.length === before ? out : undefined;
}
