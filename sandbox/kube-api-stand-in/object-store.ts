// The stand-in's storage, shaped like etcd behind the apiserver: every write of any object
// takes the next value of one global resourceVersion counter, and a history of changes lets a
// watch resume from any resourceVersion that has not been compacted away. `compact()` drops
// that history, as etcd's compaction does, so an older resourceVersion then gets 410 Gone.

import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { apiErrors } from './api-status.ts';
import { apiVersionOf, type ResourceType } from './resource-table.ts';

export type KubeObject = { apiVersion?: string; kind?: string; metadata: Record<string, any>; [field: string]: any };
export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoredChange {
  type: WatchEventType;
  resourceVersion: number;
  resource: ResourceType;
  object: KubeObject;
  /** The object before a MODIFIED, so a filtered watch can tell "left the selection". */
  previous?: KubeObject;
}

function keyOf(resource: ResourceType, namespace: string | undefined, name: string): string {
  return `${resource.group}/${resource.plural}/${namespace ?? ''}/${name}`;
}

/** What a spec change is: anything but metadata and status (the rule for metadata.generation). */
function specOf(obj: KubeObject): unknown {
  const { metadata: _m, status: _s, apiVersion: _a, kind: _k, ...rest } = obj;
  return rest;
}

export class ObjectStore {
  private revision = 1;
  private compactedThrough = 0;
  private readonly objects = new Map<string, { resource: ResourceType; object: KubeObject }>();
  private history: StoredChange[] = [];
  private readonly listeners = new Set<(change: StoredChange) => void>();

  resourceVersion(): number {
    return this.revision;
  }

  get(resource: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined {
    const entry = this.objects.get(keyOf(resource, resource.namespaced ? namespace : undefined, name));
    return entry ? structuredClone(entry.object) : undefined;
  }

  /** Every object of `resource`, in one namespace or (undefined) all, sorted as etcd keys are. */
  list(resource: ResourceType, namespace?: string): KubeObject[] {
    const out: KubeObject[] = [];
    for (const [key, entry] of [...this.objects.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (entry.resource !== resource) continue;
      if (namespace !== undefined && entry.object.metadata.namespace !== namespace) continue;
      void key;
      out.push(structuredClone(entry.object));
    }
    return out;
  }

  create(resource: ResourceType, input: KubeObject): KubeObject {
    const name = input.metadata?.name;
    const namespace = resource.namespaced ? input.metadata?.namespace : undefined;
    const key = keyOf(resource, namespace, name);
    if (this.objects.has(key)) throw apiErrors.alreadyExists(resource.group, resource.plural, name);
    const object: KubeObject = structuredClone(input);
    object.apiVersion = apiVersionOf(resource);
    object.kind = resource.kind;
    object.metadata = {
      ...object.metadata,
      ...(resource.namespaced ? { namespace } : {}),
      uid: randomUUID(),
      creationTimestamp: object.metadata.creationTimestamp ?? new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      generation: 1,
      resourceVersion: String(++this.revision),
    };
    if (!resource.namespaced) delete object.metadata.namespace;
    this.objects.set(key, { resource, object });
    this.record({ type: 'ADDED', resourceVersion: this.revision, resource, object });
    return structuredClone(object);
  }

  /**
   * Replaces a stored object. `expectedVersion` (the caller's metadata.resourceVersion) must be
   * the stored one, else 409 Conflict, the optimistic concurrency every controller relies on.
   * Server-owned metadata (uid, creationTimestamp, generation) cannot be changed by a caller.
   */
  update(resource: ResourceType, input: KubeObject, expectedVersion?: string): KubeObject {
    const name = input.metadata?.name;
    const namespace = resource.namespaced ? input.metadata?.namespace : undefined;
    const key = keyOf(resource, namespace, name);
    const current = this.objects.get(key);
    if (!current) throw apiErrors.notFound(resource.group, resource.plural, name);
    if (expectedVersion && expectedVersion !== current.object.metadata.resourceVersion) throw apiErrors.conflict(resource.group, resource.plural, name);
    const previous = current.object;
    const object: KubeObject = structuredClone(input);
    object.apiVersion = apiVersionOf(resource);
    object.kind = resource.kind;
    object.metadata = {
      ...object.metadata,
      uid: previous.metadata.uid,
      creationTimestamp: previous.metadata.creationTimestamp,
      generation: previous.metadata.generation + (isDeepStrictEqual(specOf(previous), specOf(object)) ? 0 : 1),
      resourceVersion: previous.metadata.resourceVersion,
    };
    if (previous.metadata.deletionTimestamp) {
      object.metadata.deletionTimestamp = previous.metadata.deletionTimestamp;
      object.metadata.deletionGracePeriodSeconds = previous.metadata.deletionGracePeriodSeconds;
    }
    // A write that changes nothing is not a write: no new resourceVersion, no watch event.
    if (isDeepStrictEqual(object, previous)) return structuredClone(previous);
    object.metadata.resourceVersion = String(++this.revision);
    current.object = object;
    this.record({ type: 'MODIFIED', resourceVersion: this.revision, resource, object, previous });
    return structuredClone(object);
  }

  /** Sets deletionTimestamp (graceful deletion): the object stays, marked, until `remove`. */
  markDeleting(resource: ResourceType, namespace: string | undefined, name: string, gracePeriodSeconds: number): KubeObject {
    const current = this.objects.get(keyOf(resource, resource.namespaced ? namespace : undefined, name));
    if (!current) throw apiErrors.notFound(resource.group, resource.plural, name);
    if (current.object.metadata.deletionTimestamp) return structuredClone(current.object);
    const previous = current.object;
    const object = structuredClone(previous);
    object.metadata.deletionTimestamp = new Date(Date.now() + gracePeriodSeconds * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
    object.metadata.deletionGracePeriodSeconds = gracePeriodSeconds;
    object.metadata.resourceVersion = String(++this.revision);
    current.object = object;
    this.record({ type: 'MODIFIED', resourceVersion: this.revision, resource, object, previous });
    return structuredClone(object);
  }

  remove(resource: ResourceType, namespace: string | undefined, name: string): KubeObject {
    const key = keyOf(resource, resource.namespaced ? namespace : undefined, name);
    const current = this.objects.get(key);
    if (!current) throw apiErrors.notFound(resource.group, resource.plural, name);
    this.objects.delete(key);
    // The DELETED event carries the object at a new resourceVersion, as etcd's delete revision.
    const object = structuredClone(current.object);
    object.metadata.resourceVersion = String(++this.revision);
    this.record({ type: 'DELETED', resourceVersion: this.revision, resource, object });
    return structuredClone(object);
  }

  /**
   * Changes after `resourceVersion`, for a watch resuming there. One older than the compacted
   * history is 410 Gone with the apiserver's message.
   */
  changesSince(resourceVersion: number): StoredChange[] {
    if (resourceVersion < this.compactedThrough) {
      throw apiErrors.gone(`too old resource version: ${resourceVersion} (${this.compactedThrough})`);
    }
    return this.history.filter((c) => c.resourceVersion > resourceVersion);
  }

  /** Drops the change history up to now, as etcd's compaction does. */
  compact(): number {
    this.compactedThrough = this.revision;
    this.history = [];
    return this.revision;
  }

  subscribe(listener: (change: StoredChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private record(change: StoredChange): void {
    this.history.push(change);
    for (const listener of this.listeners) listener(change);
  }
}
