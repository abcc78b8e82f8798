// packaging/kubernetes/rbac.yaml: a ServiceAccount bound to a ClusterRole with exactly the
// cluster-wide access mcplane uses (the drain's included), and to a Role for what it does in one
// namespace only (Events, in `default`), parsed with the yaml package. The calls mcplane makes in
// the other tests of this folder are each checked against it where they were made
// (assertCallsAllowed), so an Event written in any other namespace fails them.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allowedBy, allows, clusterRoleRules, grants, rbacDocuments } from './rbac.ts';

const flat = (rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[]): string[] =>
  rules.flatMap((r) => r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v) => `${g || 'core'} ${res} ${v}`)))).sort();

describe('packaging/kubernetes/rbac.yaml', () => {
  it('is a ServiceAccount, a ClusterRole and a ClusterRoleBinding, a Role in `default` and its RoleBinding', () => {
    const docs = rbacDocuments();
    assert.deepEqual(docs.map((d) => `${d.apiVersion} ${d.kind}/${d.metadata.namespace ? `${d.metadata.namespace}/` : ''}${d.metadata.name}`), [
      'v1 ServiceAccount/mcplane/mcplane', 'rbac.authorization.k8s.io/v1 ClusterRole/mcplane', 'rbac.authorization.k8s.io/v1 ClusterRoleBinding/mcplane',
      'rbac.authorization.k8s.io/v1 Role/default/mcplane-events', 'rbac.authorization.k8s.io/v1 RoleBinding/default/mcplane-events',
    ]);
    const [, , binding, , roleBinding] = docs;
    assert.deepEqual(binding!.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'mcplane' });
    assert.deepEqual(binding!.subjects, [{ kind: 'ServiceAccount', name: 'mcplane', namespace: 'mcplane' }]);
    assert.deepEqual(roleBinding!.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'mcplane-events' });
    assert.deepEqual(roleBinding!.subjects, [{ kind: 'ServiceAccount', name: 'mcplane', namespace: 'mcplane' }]);
    assert.deepEqual(grants().map((g) => [g.via, g.namespace]), [
      ['ClusterRole/mcplane via ClusterRoleBinding/mcplane', undefined],
      ['Role/mcplane-events via RoleBinding/mcplane-events', 'default'],
    ]);
  });

  it('grants cluster-wide exactly what mcplane uses in every namespace, no wildcard, and no Events', () => {
    assert.deepEqual(flat(clusterRoleRules()), [
      'core nodes get', 'core nodes list', 'core nodes patch', 'core nodes watch',
      'core pods list', 'core pods/eviction create',
      'machineconfiguration.openshift.io machineconfigpools get', 'machineconfiguration.openshift.io machineconfigpools list', 'machineconfiguration.openshift.io machineconfigpools watch',
      'machineconfiguration.openshift.io machineconfigpools/status get', 'machineconfiguration.openshift.io machineconfigpools/status update',
      'machineconfiguration.openshift.io machineconfigs get', 'machineconfiguration.openshift.io machineconfigs list', 'machineconfiguration.openshift.io machineconfigs watch',
      'policy poddisruptionbudgets get', 'policy poddisruptionbudgets list',
      // MCO's MachineConfigNode objects, kept per node when the cluster has their CRD.
      ...['list', 'create', 'update', 'delete'].map((v) => `machineconfiguration.openshift.io machineconfignodes ${v}`),
      'machineconfiguration.openshift.io machineconfignodes/status update',
      // mcctl import and --kubernetes-source: the higher-level configs and the PinnedImageSets.
      ...['machineconfiguration.openshift.io kubeletconfigs', 'machineconfiguration.openshift.io containerruntimeconfigs', 'machineconfiguration.openshift.io pinnedimagesets',
        'config.openshift.io images', 'config.openshift.io imagedigestmirrorsets', 'config.openshift.io imagetagmirrorsets',
        'config.openshift.io clusterimagepolicies', 'config.openshift.io criocredentialproviderconfigs', 'operator.openshift.io imagecontentsourcepolicies'].flatMap((r) => [`${r} list`, `${r} watch`]),
    ].sort());
    // Whatever other role a change adds, none may grant Events beyond one namespace.
    for (const g of grants()) {
      if (g.namespace === undefined) assert.equal(allows(g.rules, { verb: 'create', apiGroup: '', resource: 'events' }), false, `${g.via} lets mcplane write Events in every namespace`);
    }
  });

  it('grants Events (create, and patch for the count) in `default` only: where the recorder puts Events on cluster-scoped objects', () => {
    const granted = grants();
    assert.deepEqual(flat(granted.find((g) => g.namespace === 'default')!.rules), ['core events create', 'core events patch']);
    for (const verb of ['create', 'patch'] as const) {
      assert.equal(allowedBy(granted, { verb, apiGroup: '', resource: 'events', namespace: 'default' }), true);
      assert.equal(allowedBy(granted, { verb, apiGroup: '', resource: 'events', namespace: 'kube-system' }), false, `${verb} events in kube-system`);
      assert.equal(allowedBy(granted, { verb, apiGroup: '', resource: 'events', namespace: 'mcplane' }), false, `${verb} events in mcplane`);
    }
    assert.equal(allowedBy(granted, { verb: 'list', apiGroup: '', resource: 'events', namespace: 'default' }), false);
    assert.equal(allowedBy(granted, { verb: 'delete', apiGroup: '', resource: 'events', namespace: 'default' }), false);
    // The cluster-wide grant still holds in any namespace.
    assert.equal(allowedBy(granted, { verb: 'list', apiGroup: '', resource: 'pods', namespace: 'kube-system' }), true);
  });

  it('a grant counts only where its binding puts it: an unbound Role or a binding to another account grants nothing', () => {
    const docs = rbacDocuments();
    const role = docs.find((d) => d.kind === 'Role')!;
    const roleBinding = docs.find((d) => d.kind === 'RoleBinding')!;
    const elsewhere = { ...roleBinding, subjects: [{ kind: 'ServiceAccount', name: 'mcplane', namespace: 'other' }] };
    assert.deepEqual(grants([docs[0]!, role, elsewhere]), []);
    // A cluster-wide Events grant, as rbac.yaml had it, is caught by the check above.
    const wide = grants([{ kind: 'ClusterRole', metadata: { name: 'x' }, rules: role.rules }, { kind: 'ClusterRoleBinding', metadata: { name: 'x' }, roleRef: { kind: 'ClusterRole', name: 'x' }, subjects: roleBinding.subjects }]);
    assert.equal(allowedBy(wide, { verb: 'create', apiGroup: '', resource: 'events', namespace: 'kube-system' }), true);
  });

  it('the check reads rules as the RBAC authorizer does: group, resource/subresource and verb must all match', () => {
    const rules = clusterRoleRules();
    assert.equal(allows(rules, { verb: 'create', apiGroup: '', resource: 'pods', subresource: 'eviction' }), true);
    assert.equal(allows(rules, { verb: 'delete', apiGroup: '', resource: 'pods' }), false, 'a drain evicts, never deletes');
    assert.equal(allows(rules, { verb: 'update', apiGroup: 'machineconfiguration.openshift.io', resource: 'machineconfigpools', subresource: 'status' }), true);
    assert.equal(allows(rules, { verb: 'update', apiGroup: 'machineconfiguration.openshift.io', resource: 'machineconfigpools' }), false, 'the pool spec is the user\'s');
    assert.equal(allows(rules, { verb: 'create', apiGroup: 'machineconfiguration.openshift.io', resource: 'machineconfigs' }), false);
    assert.equal(allows(rules, { verb: 'get', apiGroup: 'policy', resource: 'pods' }), false, 'the group matters');
    assert.equal(allows(rules, { verb: 'create', apiGroup: '', resource: 'events' }), false, 'Events are granted in one namespace, by the Role');
    assert.equal(allows(rules, { verb: 'update', apiGroup: '', resource: 'nodes' }), false, 'nodes are patched, never replaced');
  });
});
