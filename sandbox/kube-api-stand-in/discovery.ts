// Discovery documents (/api, /apis, /api/v1, /apis/GROUP/VERSION) for the stand-in's
// resources, so clients that resolve kinds through discovery (KubernetesObjectApi) work.

import { apiErrors } from './api-status.ts';
import { STAND_IN_RESOURCES, apiVersionOf } from './resource-table.ts';

export function serveDiscovery(root: 'api' | 'apis' | undefined, group?: string, version?: string): unknown {
  if (root === 'api') return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] };
  if (group === undefined) {
    const groups = [...new Set(STAND_IN_RESOURCES.filter((r) => r.group).map((r) => r.group))];
    return {
      kind: 'APIGroupList',
      apiVersion: 'v1',
      groups: groups.map((name) => {
        const v = STAND_IN_RESOURCES.find((r) => r.group === name)!.version;
        return { name, versions: [{ groupVersion: `${name}/${v}`, version: v }], preferredVersion: { groupVersion: `${name}/${v}`, version: v } };
      }),
    };
  }
  const resources = STAND_IN_RESOURCES.filter((r) => r.group === group && r.version === version);
  if (resources.length === 0) throw apiErrors.pathNotFound(group ? `/apis/${group}/${version}` : `/api/${version}`);
  const verbs = ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'];
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: apiVersionOf(resources[0]!),
    resources: resources.flatMap((r) => [
      { name: r.plural, singularName: r.kind.toLowerCase(), namespaced: r.namespaced, kind: r.kind, verbs },
      ...(r.status ? [{ name: `${r.plural}/status`, singularName: '', namespaced: r.namespaced, kind: r.kind, verbs: ['get', 'patch', 'update'] }] : []),
      ...(r.plural === 'pods' ? [{ name: 'pods/eviction', singularName: '', namespaced: true, group: 'policy', version: 'v1', kind: 'Eviction', verbs: ['create'] }] : []),
    ]),
  };
}
