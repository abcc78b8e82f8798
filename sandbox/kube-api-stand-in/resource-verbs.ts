// The verbs on one resource, with the apiserver's rules for what each may change: create
// refuses an existing name (409 AlreadyExists), update and patch refuse a stale
// metadata.resourceVersion (409 Conflict), the main resource ignores status where a status
// subresource exists and /status changes nothing but status, and a CRD's create drops status
// (its status subresource owns it). Pods are deleted gracefully.

import { randomBytes } from 'node:crypto';
import { apiErrors } from './api-status.ts';
import type { GracefulDeletion } from './graceful-deletion.ts';
import type { KubeObject, ObjectStore } from './object-store.ts';
import { applyPatch, type Json } from './patches.ts';
import type { ResourceRoute } from './request-routing.ts';
import { apiVersionOf, type ResourceType } from './resource-table.ts';
import { parseFieldSelector, parseLabelSelector } from './selectors.ts';

export interface VerbContext {
  store: ObjectStore;
  deletion: GracefulDeletion;
}

export function listObjects(ctx: VerbContext, route: ResourceRoute, query: URLSearchParams): Record<string, any> {
  const match = selectionOf(route, query);
  const items = ctx.store.list(route.resource, route.namespace).filter(match).map((o) => itemOf(route.resource, o));
  return {
    kind: `${route.resource.kind}List`,
    apiVersion: apiVersionOf(route.resource),
    metadata: { resourceVersion: String(ctx.store.resourceVersion()) },
    items,
  };
}

/** The namespace, labelSelector and fieldSelector of a list or watch, as one predicate. */
export function selectionOf(route: ResourceRoute, query: URLSearchParams): (o: KubeObject) => boolean {
  const labels = parseLabelSelector(query.get('labelSelector') ?? '');
  const fields = parseFieldSelector(query.get('fieldSelector') ?? '');
  return (o) => (route.namespace === undefined || o.metadata.namespace === route.namespace) && labels(o.metadata.labels) && fields(o);
}

/** Built-in types' list items carry no apiVersion/kind on the wire; custom resources' do. */
function itemOf(resource: ResourceType, o: KubeObject): KubeObject {
  if (resource.custom) return o;
  const { apiVersion: _a, kind: _k, ...rest } = o;
  return rest as KubeObject;
}

export function getObject(ctx: VerbContext, route: ResourceRoute): KubeObject {
  const found = ctx.store.get(route.resource, route.namespace, route.name!);
  if (!found) throw apiErrors.notFound(route.resource.group, route.resource.plural, route.name!);
  return found;
}

export function createObject(ctx: VerbContext, route: ResourceRoute, body: Record<string, any>): KubeObject {
  const resource = route.resource;
  checkBodyKind(resource, body);
  const metadata = { ...(body.metadata ?? {}) };
  if (!metadata.name && metadata.generateName) metadata.name = `${metadata.generateName}${randomBytes(3).toString('hex').slice(0, 5)}`;
  if (!metadata.name) throw apiErrors.invalid(resource.kind, '', [{ field: 'metadata.name', message: 'Required value: name or generateName is required' }]);
  if (resource.namespaced) {
    if (metadata.namespace !== undefined && metadata.namespace !== route.namespace) {
      throw apiErrors.badRequest('the namespace of the provided object does not match the namespace sent on the request');
    }
    metadata.namespace = route.namespace;
  }
  for (const owned of ['uid', 'resourceVersion', 'generation', 'creationTimestamp', 'deletionTimestamp']) delete metadata[owned];
  const object: KubeObject = { ...body, metadata };
  if (resource.custom && resource.status) delete object.status;
  pruneSpec(resource, object);
  // The pod strategy's PrepareForCreate: a new pod is Pending until a kubelet says otherwise.
  if (resource.plural === 'pods') object.status = { phase: 'Pending' };
  return ctx.store.create(resource, object);
}

export function updateObject(ctx: VerbContext, route: ResourceRoute, body: Record<string, any>): KubeObject {
  const current = getObject(ctx, route);
  checkBodyKind(route.resource, body);
  checkBodyName(route, body);
  return write(ctx, route, current, body);
}

export function patchObject(ctx: VerbContext, route: ResourceRoute, contentType: string, patch: Json): KubeObject {
  const current = getObject(ctx, route);
  const patched = applyPatch(contentType, current as unknown as Json, patch) as Record<string, any>;
  if (patched === null || typeof patched !== 'object' || Array.isArray(patched)) throw apiErrors.badRequest('the patch does not leave an object');
  checkBodyName(route, patched);
  return write(ctx, route, current, patched);
}

/**
 * Writes `next` over `current` under the subresource's rules. The resourceVersion the caller
 * sent (in the body, or kept by the patch) is the precondition; none means unconditional.
 */
function write(ctx: VerbContext, route: ResourceRoute, current: KubeObject, next: Record<string, any>): KubeObject {
  const resource = route.resource;
  const expected: string | undefined = next.metadata?.resourceVersion;
  let object: KubeObject;
  if (route.subresource === 'status') {
    object = { ...current, status: next.status };
    if (next.status === undefined) delete object.status;
  } else {
    object = { ...next, metadata: { ...(next.metadata ?? {}), name: current.metadata.name, ...(resource.namespaced ? { namespace: current.metadata.namespace } : {}) } } as KubeObject;
    if (resource.status) {
      if (current.status === undefined) delete object.status;
      else object.status = current.status;
    }
    pruneSpec(resource, object);
  }
  return ctx.store.update(resource, object, expected);
}

/** What the apiserver does with spec fields a CRD's structural schema does not declare: drops them. */
function pruneSpec(resource: ResourceType, object: KubeObject): void {
  const spec = object.spec;
  if (!resource.specFields || spec === null || typeof spec !== 'object' || Array.isArray(spec)) return;
  for (const key of Object.keys(spec)) if (!resource.specFields.includes(key)) delete spec[key];
}

export function deleteObject(ctx: VerbContext, route: ResourceRoute, query: URLSearchParams, body: Record<string, any> | undefined): KubeObject {
  const current = getObject(ctx, route);
  const pre = body?.preconditions;
  if ((pre?.resourceVersion && pre.resourceVersion !== current.metadata.resourceVersion) || (pre?.uid && pre.uid !== current.metadata.uid)) {
    throw apiErrors.conflict(route.resource.group, route.resource.plural, route.name!);
  }
  if (route.resource.plural === 'pods') {
    const q = query.get('gracePeriodSeconds');
    const grace = typeof body?.gracePeriodSeconds === 'number' ? body.gracePeriodSeconds : q !== null ? Number(q) : undefined;
    return ctx.deletion.delete(current, grace);
  }
  return ctx.store.remove(route.resource, route.namespace, route.name!);
}

function checkBodyKind(resource: ResourceType, body: Record<string, any>): void {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw apiErrors.badRequest('the request body is not a JSON object');
  if (body.kind !== undefined && body.kind !== resource.kind) {
    throw apiErrors.badRequest(`the API version in the data (${body.apiVersion}) does not match the expected API version (${apiVersionOf(resource)}) or kind ${body.kind} is not ${resource.kind}`);
  }
}

function checkBodyName(route: ResourceRoute, body: Record<string, any>): void {
  if (body.metadata?.name !== undefined && body.metadata.name !== route.name) {
    throw apiErrors.badRequest(`the name of the object (${body.metadata.name}) does not match the name on the URL (${route.name})`);
  }
  if (route.resource.namespaced && body.metadata?.namespace !== undefined && body.metadata.namespace !== route.namespace) {
    throw apiErrors.badRequest('the namespace of the provided object does not match the namespace sent on the request');
  }
}
