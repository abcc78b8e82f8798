// packaging/kubernetes/rbac.yaml: a ServiceAccount bound to a ClusterRole with exactly the
// access mcplane uses (the drain's included), parsed with the yaml package. The calls mcplane
// makes in the other tests of this folder are each checked against it (assertCallsAllowed).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { allows, clusterRoleRules, rbacDocuments } from './rbac.ts';

describe('packaging/kubernetes/rbac.yaml', () => {
  it('is a ServiceAccount, a ClusterRole and a ClusterRoleBinding of the one to the other', () => {
    const docs = rbacDocuments();
    assert.deepEqual(docs.map((d) => `${d.apiVersion} ${d.kind}/${d.metadata.name}`), [
      'v1 ServiceAccount/mcplane', 'rbac.authorization.k8s.io/v1 ClusterRole/mcplane', 'rbac.authorization.k8s.io/v1 ClusterRoleBinding/mcplane',
    ]);
    const [sa, , binding] = docs;
    assert.equal(sa!.metadata.namespace, 'mcplane');
    assert.deepEqual(binding!.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'mcplane' });
    assert.deepEqual(binding!.subjects, [{ kind: 'ServiceAccount', name: 'mcplane', namespace: 'mcplane' }]);
  });

  it('grants exactly what mcplane uses, no wildcard', () => {
    const granted = clusterRoleRules().flatMap((r) => r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v) => `${g || 'core'} ${res} ${v}`)))).sort();
    assert.deepEqual(granted, [
      'core events create', 'core events patch',
      'core nodes get', 'core nodes list', 'core nodes patch', 'core nodes watch',
      'core pods list', 'core pods/eviction create',
      'machineconfiguration.openshift.io machineconfigpools get', 'machineconfiguration.openshift.io machineconfigpools list', 'machineconfiguration.openshift.io machineconfigpools watch',
      'machineconfiguration.openshift.io machineconfigpools/status get', 'machineconfiguration.openshift.io machineconfigpools/status update',
      'machineconfiguration.openshift.io machineconfigs get', 'machineconfiguration.openshift.io machineconfigs list', 'machineconfiguration.openshift.io machineconfigs watch',
      'policy poddisruptionbudgets get', 'policy poddisruptionbudgets list',
    ].sort());
  });

  it('the check reads rules as the RBAC authorizer does: group, resource/subresource and verb must all match', () => {
    const rules = clusterRoleRules();
    assert.equal(allows(rules, { verb: 'create', apiGroup: '', resource: 'pods', subresource: 'eviction' }), true);
    assert.equal(allows(rules, { verb: 'delete', apiGroup: '', resource: 'pods' }), false, 'a drain evicts, never deletes');
    assert.equal(allows(rules, { verb: 'update', apiGroup: 'machineconfiguration.openshift.io', resource: 'machineconfigpools', subresource: 'status' }), true);
    assert.equal(allows(rules, { verb: 'update', apiGroup: 'machineconfiguration.openshift.io', resource: 'machineconfigpools' }), false, 'the pool spec is the user\'s');
    assert.equal(allows(rules, { verb: 'create', apiGroup: 'machineconfiguration.openshift.io', resource: 'machineconfigs' }), false);
    assert.equal(allows(rules, { verb: 'get', apiGroup: 'policy', resource: 'pods' }), false, 'the group matters');
    assert.equal(allows(rules, { verb: 'list', apiGroup: '', resource: 'events' }), false);
    assert.equal(allows(rules, { verb: 'update', apiGroup: '', resource: 'nodes' }), false, 'nodes are patched, never replaced');
  });
});
