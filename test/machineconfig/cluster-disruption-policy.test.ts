import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defaultPools, diffSpecs, mergeDisruptionPolicies, parseManifests, planDisruption, policyEntryOrigin, renderPool } from '../../src/machineconfig/index.ts';
import { fileEntry, ign, mcDoc, parseValid } from '../helpers/manifests.ts';

// As an OpenShift cluster prints it (oc get machineconfiguration cluster -o yaml), status included.
const OPENSHIFT_YAML = `apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
  uid: 2f9f6c1e-0000-4000-8000-000000000000
spec:
  logLevel: Normal
  managementState: Managed
  operatorLogLevel: Normal
  nodeDisruptionPolicy:
    files:
      - path: /etc/my-app.conf
        actions:
          - type: Restart
            restart:
              serviceName: my-app.service
      - path: /etc/chrony.conf
        actions:
          - type: Drain
          - type: Reload
            reload:
              serviceName: chronyd.service
      - path: /etc/motd
        actions:
          - type: None
    units:
      - name: my-app.service
        actions:
          - type: DaemonReload
          - type: Restart
            restart: {serviceName: my-app.service}
    sshkey:
      actions:
        - type: Reboot
status:
  nodeDisruptionPolicyStatus:
    clusterPolicies:
      files:
        - path: /etc/containers/registries.conf
          actions: [{type: Special}]
`;

const cluster = (policy: unknown, name = 'cluster') => JSON.stringify({ apiVersion: 'operator.openshift.io/v1', kind: 'MachineConfiguration', metadata: { name }, spec: { nodeDisruptionPolicy: policy } });
const problems = (text: string) => parseManifests(text, 'x.yaml').problems.map((p) => `${p.object} ${p.field} ${p.rule}`);
const file = (path: string, actions: unknown[]) => ({ files: [{ path, actions }] });

test('an OpenShift MachineConfiguration/cluster applies unmodified, MCO actions mapped to mcplane\'s', () => {
  const parsed = parseManifests(OPENSHIFT_YAML, 'cluster.yaml');
  assert.deepEqual(parsed.problems, []);
  assert.equal(parsed.machineConfigurations.length, 1);
  assert.deepEqual(parsed.machineConfigurations[0]!.spec.nodeDisruptionPolicy, {
    files: [
      { path: '/etc/my-app.conf', actions: [{ type: 'restart', unit: 'my-app.service' }] },
      { path: '/etc/chrony.conf', actions: [{ type: 'drain' }, { type: 'reload', unit: 'chronyd.service' }] },
      { path: '/etc/motd', actions: [{ type: 'none' }] },
    ],
    units: [{ name: 'my-app.service', actions: [{ type: 'daemon-reload' }, { type: 'restart', unit: 'my-app.service' }] }],
    sshkey: { actions: [{ type: 'reboot' }] },
  });
});

test('only the name cluster is accepted, and the apiVersion is MCO\'s operator group', () => {
  assert.deepEqual(problems(cluster({}, 'other')), ['MachineConfiguration/other metadata.name cluster-name']);
  assert.deepEqual(problems(cluster({}).replace('operator.openshift.io/v1', 'machineconfiguration.openshift.io/v1')), ['MachineConfiguration/cluster apiVersion api-version']);
});

test('each MCO rule is a problem naming the object, the field and the rule', () => {
  const cases: [unknown, string][] = [
    [file('etc/a', [{ type: 'None' }]), 'spec.nodeDisruptionPolicy.files[0].path path-absolute'],
    [file('/etc/a', []), 'spec.nodeDisruptionPolicy.files[0].actions required'],
    [file('/etc/a', [{ type: 'Restart' }]), 'spec.nodeDisruptionPolicy.files[0].actions[0].restart union'],
    [file('/etc/a', [{ type: 'None', reload: { serviceName: 'a.service' } }]), 'spec.nodeDisruptionPolicy.files[0].actions[0].reload union'],
    [file('/etc/a', [{ type: 'Reload', reload: { serviceName: 'crio' } }]), 'spec.nodeDisruptionPolicy.files[0].actions[0].reload.serviceName service-name'],
    [file('/etc/a', [{ type: 'Reload', reload: { serviceName: 'a b.service' } }]), 'spec.nodeDisruptionPolicy.files[0].actions[0].reload.serviceName service-name'],
    [file('/etc/a', [{ type: 'Reboot' }, { type: 'DaemonReload' }]), 'spec.nodeDisruptionPolicy.files[0].actions standalone-action'],
    [file('/etc/a', [{ type: 'None' }, { type: 'Drain' }]), 'spec.nodeDisruptionPolicy.files[0].actions standalone-action'],
    [file('/etc/a', [{ type: 'Special' }]), 'spec.nodeDisruptionPolicy.files[0].actions[0].type reserved-action'],
    [file('/etc/a', [{ type: 'reboot' }]), 'spec.nodeDisruptionPolicy.files[0].actions[0].type disruption-action'],
    [file('/etc/a', Array.from({ length: 11 }, () => ({ type: 'Drain' }))), 'spec.nodeDisruptionPolicy.files[0].actions max-items'],
    [{ files: [{ path: '/etc/a', actions: [{ type: 'None' }] }, { path: '/etc/a', actions: [{ type: 'None' }] }] }, 'spec.nodeDisruptionPolicy.files[1].path duplicate-entry'],
    [{ units: [{ name: 'crio', actions: [{ type: 'None' }] }] }, 'spec.nodeDisruptionPolicy.units[0].name service-name'],
    [{ units: [{ name: 'a.service', actions: [{ type: 'None' }] }, { name: 'a.service', actions: [{ type: 'None' }] }] }, 'spec.nodeDisruptionPolicy.units[1].name duplicate-entry'],
    [{ sshkey: {} }, 'spec.nodeDisruptionPolicy.sshkey.actions required'],
    [{ files: Array.from({ length: 51 }, (_, i) => ({ path: `/etc/f${i}`, actions: [{ type: 'None' }] })) }, 'spec.nodeDisruptionPolicy.files max-items'],
    [{ file: [] }, 'spec.nodeDisruptionPolicy.file unknown-field'],
  ];
  for (const [policy, expected] of cases) {
    assert.deepEqual(problems(cluster(policy)), [`MachineConfiguration/cluster ${expected}`], JSON.stringify(policy));
  }
  const special = parseManifests(cluster(file('/etc/containers/registries.conf', [{ type: 'Special' }])), 'x').problems[0]!;
  assert.match(special.message, /reserved.*crio\.service/);
});

test('a pool\'s entries replace the cluster\'s for the same path, unit or sshkey; the rest of the cluster\'s stays', () => {
  const merged = mergeDisruptionPolicies(
    { files: [{ path: '/etc/a', actions: [{ type: 'none' }] }, { path: '/etc/b/', actions: [{ type: 'restart', unit: 'b.service' }] }], units: [{ name: 'u.service', actions: [{ type: 'none' }] }], sshkey: { actions: [{ type: 'reboot' }] } },
    { files: [{ path: '/etc/b/', actions: [{ type: 'reload', unit: 'b.service' }] }], sshkey: { actions: [{ type: 'none' }] } },
  );
  assert.deepEqual(merged, {
    files: [{ path: '/etc/a', actions: [{ type: 'none' }] }, { path: '/etc/b/', actions: [{ type: 'reload', unit: 'b.service' }] }],
    units: [{ name: 'u.service', actions: [{ type: 'none' }] }],
    sshkey: { actions: [{ type: 'none' }] },
  });
  assert.equal(mergeDisruptionPolicies(undefined, undefined), undefined);
  const only = { units: [{ name: 'x.service', actions: [{ type: 'none' as const }] }] };
  assert.deepEqual(mergeDisruptionPolicies(only, undefined), only);
  assert.deepEqual(mergeDisruptionPolicies(undefined, only), only);
});

test('a file covered only by the cluster policy needs its action, not a reboot, in a pool with its own policy', () => {
  const worker = defaultPools()[1]!;
  const spec = (text: string) => renderPool(worker, parseValid(mcDoc('f', 'worker', { config: ign('3.4.0', { storage: { files: [fileEntry('/etc/my-app.conf', text)] } }) })).configs).spec;
  const clusterPolicy = parseManifests(OPENSHIFT_YAML).machineConfigurations[0]!.spec.nodeDisruptionPolicy;
  const poolPolicy = { files: [{ path: '/etc/other/', actions: [{ type: 'none' as const }] }] };
  const diff = diffSpecs(spec('a'), spec('b'));
  assert.equal(planDisruption(diff, poolPolicy).reboot, true);
  assert.deepEqual(planDisruption(diff, mergeDisruptionPolicies(clusterPolicy, poolPolicy)), {
    reboot: false, rebootReasons: [], actions: [{ type: 'restart', unit: 'my-app.service' }],
    decisions: [{ change: 'file /etc/my-app.conf changed', actions: [{ type: 'restart', unit: 'my-app.service' }], entry: { kind: 'files', key: '/etc/my-app.conf' }, rule: 'policy files /etc/my-app.conf' }],
  });
});

test('the preview names the policy entry that decided a change as the user finds it: the pool\'s for the same key, else the cluster\'s', () => {
  const cluster = { files: [{ path: '/etc/a/', actions: [{ type: 'none' as const }] }, { path: '/etc/b/', actions: [{ type: 'none' as const }] }], sshkey: { actions: [{ type: 'none' as const }] } };
  const pool = { files: [{ path: '/etc/b/', actions: [{ type: 'reboot' as const }] }], units: [{ name: 'u.service', actions: [{ type: 'none' as const }] }] };
  assert.equal(policyEntryOrigin(cluster, pool, 'infra', { kind: 'files', key: '/etc/a/' }), 'MachineConfiguration/cluster spec.nodeDisruptionPolicy.files[0]');
  assert.equal(policyEntryOrigin(cluster, pool, 'infra', { kind: 'files', key: '/etc/b/' }), 'MachineConfigPool/infra spec.disruptionPolicy.files[0]');
  assert.equal(policyEntryOrigin(cluster, pool, 'infra', { kind: 'units', key: 'u.service' }), 'MachineConfigPool/infra spec.disruptionPolicy.units[0]');
  assert.equal(policyEntryOrigin(cluster, pool, 'infra', { kind: 'sshkey', key: '' }), 'MachineConfiguration/cluster spec.nodeDisruptionPolicy.sshkey');
  // The plan of the merged policy points at the entry the origin is found for.
  const plan = planDisruption({ ...diffSpecs(undefined, renderPool(defaultPools()[1]!, []).spec), files: [{ path: '/etc/b/x', change: 'added' }] }, mergeDisruptionPolicies(cluster, pool));
  assert.deepEqual(plan.decisions.find((d) => d.change === 'file /etc/b/x added')?.entry, { kind: 'files', key: '/etc/b/' });
});
