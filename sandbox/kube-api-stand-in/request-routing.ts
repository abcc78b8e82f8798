// Reads an apiserver URL path into what it names, as the apiserver's request info resolver
// does: /api/v1/... for the core group, /apis/GROUP/VERSION/... for the rest, then
// [namespaces/NS/]PLURAL[/NAME[/SUBRESOURCE]].

import { apiErrors } from './api-status.ts';
import { resourceByPath, type ResourceType } from './resource-table.ts';

export interface ResourceRoute {
  resource: ResourceType;
  namespace?: string;
  name?: string;
  subresource?: string;
}

export type Route = { kind: 'resource'; route: ResourceRoute } | { kind: 'discovery'; root?: 'api' | 'apis'; group?: string; version?: string };

export function routeOf(pathname: string): Route {
  const parts = pathname.split('/').filter(Boolean).map(decodeURIComponent);
  let group: string;
  let rest: string[];
  if (parts[0] === 'api') {
    if (parts.length === 1) return { kind: 'discovery', root: 'api' };
    if (parts.length === 2) return { kind: 'discovery', group: '', version: parts[1]! };
    group = '';
    rest = parts.slice(1);
  } else if (parts[0] === 'apis') {
    if (parts.length === 1) return { kind: 'discovery', root: 'apis' };
    if (parts.length === 3) return { kind: 'discovery', group: parts[1]!, version: parts[2]! };
    if (parts.length < 3) throw apiErrors.pathNotFound(pathname);
    group = parts[1]!;
    rest = parts.slice(2);
  } else {
    throw apiErrors.pathNotFound(pathname);
  }
  const version = rest[0]!;
  let tail = rest.slice(1);
  let namespace: string | undefined;
  if (tail[0] === 'namespaces' && tail.length >= 3) {
    namespace = tail[1]!;
    tail = tail.slice(2);
  }
  const resource = resourceByPath(group, version, tail[0] ?? '');
  if (!resource || tail.length > 3) throw apiErrors.pathNotFound(pathname);
  if (namespace !== undefined && !resource.namespaced) throw apiErrors.pathNotFound(pathname);
  // A namespaced resource's single object lives only under its namespace.
  if (resource.namespaced && namespace === undefined && tail.length > 1) throw apiErrors.pathNotFound(pathname);
  const subresource = tail[2];
  if (subresource !== undefined && !(subresource === 'status' && resource.status) && !(subresource === 'eviction' && resource.plural === 'pods')) {
    throw apiErrors.pathNotFound(pathname);
  }
  return {
    kind: 'resource',
    route: { resource, ...(namespace !== undefined ? { namespace } : {}), ...(tail[1] !== undefined ? { name: tail[1] } : {}), ...(subresource ? { subresource } : {}) },
  };
}
