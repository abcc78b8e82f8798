// packaging/kubernetes/rbac.yaml, read as Kubernetes' RBAC authorizer reads a ClusterRole: a
// request is allowed when one rule lists its API group, its resource (`resource/subresource`
// for a subresource) and its verb. Tests that run mcplane against the Kubernetes API stand-in
// check every call mcplane made there with assertCallsAllowed.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { StandInRequest } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { REPO_ROOT } from '../helpers/run-cli.ts';

export const RBAC_MANIFEST = join(REPO_ROOT, 'packaging/kubernetes/rbac.yaml');

export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

export function rbacDocuments(): Record<string, any>[] {
  return parseAllDocuments(readFileSync(RBAC_MANIFEST, 'utf8')).map((d) => d.toJS());
}

export function clusterRoleRules(): PolicyRule[] {
  const role = rbacDocuments().find((d) => d.kind === 'ClusterRole');
  assert.ok(role, 'rbac.yaml has a ClusterRole');
  return role.rules;
}

export function allows(rules: PolicyRule[], r: Pick<StandInRequest, 'verb' | 'apiGroup' | 'resource' | 'subresource'>): boolean {
  const resource = r.subresource ? `${r.resource}/${r.subresource}` : r.resource;
  return rules.some((rule) =>
    (rule.apiGroups.includes(r.apiGroup ?? '') || rule.apiGroups.includes('*')) &&
    (rule.resources.includes(resource ?? '') || rule.resources.includes('*')) &&
    (rule.verbs.includes(r.verb) || rule.verbs.includes('*')));
}

/**
 * Every call mcplane made with its own credentials (every authenticated user but the test's
 * `admin`) is allowed by the manifest; returns how many there were.
 */
export function assertCallsAllowed(requests: readonly StandInRequest[]): number {
  const rules = clusterRoleRules();
  const mine = requests.filter((r) => r.authenticated && r.user !== 'admin');
  const denied = mine.filter((r) => !allows(rules, r)).map((r) => `${r.verb} ${r.apiGroup || 'core'}/${r.resource}${r.subresource ? `/${r.subresource}` : ''} (${r.method} ${r.path})`);
  assert.deepEqual([...new Set(denied)], [], 'calls mcplane made that packaging/kubernetes/rbac.yaml does not allow');
  return mine.length;
}
