// packaging/kubernetes/rbac.yaml, read as Kubernetes' RBAC authorizer reads it: what the
// ServiceAccount mcplane/mcplane may do is the rules of each role bound to it, a ClusterRole
// through a ClusterRoleBinding in every namespace and cluster-wide, a Role (or a ClusterRole)
// through a RoleBinding in the binding's namespace only; a request is allowed when one rule
// granted where it is made lists its API group, its resource (`resource/subresource` for a
// subresource) and its verb. Tests that run mcplane against the Kubernetes API stand-in check
// every call mcplane made there with assertCallsAllowed.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { StandInRequest } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { REPO_ROOT } from '../helpers/run-cli.ts';

export const RBAC_MANIFEST = join(REPO_ROOT, 'packaging/kubernetes/rbac.yaml');
export const SERVICE_ACCOUNT = { kind: 'ServiceAccount', name: 'mcplane', namespace: 'mcplane' };

export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

/** Rules granted to the service account, and where: everywhere (no namespace) or in one namespace. */
export interface Grant {
  /** "ClusterRole/mcplane via ClusterRoleBinding/mcplane". */
  via: string;
  namespace?: string;
  rules: PolicyRule[];
}

export type Request = Pick<StandInRequest, 'verb' | 'apiGroup' | 'resource' | 'subresource' | 'namespace'>;

export function rbacDocuments(): Record<string, any>[] {
  return parseAllDocuments(readFileSync(RBAC_MANIFEST, 'utf8')).map((d) => d.toJS());
}

export function clusterRoleRules(): PolicyRule[] {
  const role = rbacDocuments().find((d) => d.kind === 'ClusterRole');
  assert.ok(role, 'rbac.yaml has a ClusterRole');
  return role.rules;
}

/** What the manifest grants the service account: only roles a binding to it names count. */
export function grants(docs = rbacDocuments()): Grant[] {
  const out: Grant[] = [];
  for (const binding of docs.filter((d) => d.kind === 'ClusterRoleBinding' || d.kind === 'RoleBinding')) {
    const bound = (binding.subjects ?? []).some((s: Record<string, string>) => s.kind === SERVICE_ACCOUNT.kind && s.name === SERVICE_ACCOUNT.name && s.namespace === SERVICE_ACCOUNT.namespace);
    if (!bound) continue;
    const ref = binding.roleRef as { kind: string; name: string };
    // A RoleBinding's Role is the one in the binding's own namespace.
    const role = docs.find((d) => d.kind === ref.kind && d.metadata.name === ref.name && (ref.kind === 'ClusterRole' || d.metadata.namespace === binding.metadata.namespace));
    assert.ok(role, `${binding.kind}/${binding.metadata.name} refers to ${ref.kind}/${ref.name}, which rbac.yaml does not define`);
    out.push({
      via: `${ref.kind}/${ref.name} via ${binding.kind}/${binding.metadata.name}`,
      ...(binding.kind === 'RoleBinding' ? { namespace: binding.metadata.namespace as string } : {}),
      rules: role.rules ?? [],
    });
  }
  return out;
}

/** Whether these rules allow the request, wherever it is made. */
export function allows(rules: PolicyRule[], r: Omit<Request, 'namespace'>): boolean {
  const resource = r.subresource ? `${r.resource}/${r.subresource}` : r.resource;
  return rules.some((rule) =>
    (rule.apiGroups.includes(r.apiGroup ?? '') || rule.apiGroups.includes('*')) &&
    (rule.resources.includes(resource ?? '') || rule.resources.includes('*')) &&
    (rule.verbs.includes(r.verb) || rule.verbs.includes('*')));
}

/** Whether the granted rules allow the request where it is made (a namespaced grant: only in its namespace). */
export function allowedBy(granted: Grant[], r: Request): boolean {
  return granted.some((g) => (g.namespace === undefined || g.namespace === r.namespace) && allows(g.rules, r));
}

/**
 * Every call mcplane made with its own credentials (every authenticated user but the test's
 * `admin`) is allowed by the manifest where it was made; returns how many there were.
 */
export function assertCallsAllowed(requests: readonly StandInRequest[]): number {
  const granted = grants();
  const mine = requests.filter((r) => r.authenticated && r.user !== 'admin');
  const denied = mine.filter((r) => !allowedBy(granted, r))
    .map((r) => `${r.verb} ${r.apiGroup || 'core'}/${r.resource}${r.subresource ? `/${r.subresource}` : ''}${r.namespace ? ` in namespace ${r.namespace}` : ''} (${r.method} ${r.path})`);
  assert.deepEqual([...new Set(denied)], [], 'calls mcplane made that packaging/kubernetes/rbac.yaml does not allow');
  return mine.length;
}
