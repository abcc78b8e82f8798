// How objects sit in etcd: key `${prefix}${kind}/${name}`, value a JSON envelope holding the value
// and the creation time (etcd keeps a create_revision but no time). resourceVersion is etcd's
// mod_revision, so it is the store revision of the commit that last wrote the object, as in the
// SQLite store.

import { STORED_KINDS, type StoredKind, type StoredObject } from './store.ts';
import type { KeyValue } from './etcd-proto.ts';

interface Envelope {
  createdAt: number;
  value: unknown;
}

const KINDS = new Set<string>(STORED_KINDS);

export class EtcdKeys {
  readonly prefix: string;
  readonly prefixKey: Buffer;
  readonly prefixEnd: Buffer;

  constructor(prefix: string) {
    this.prefix = prefix;
    this.prefixKey = Buffer.from(prefix);
    this.prefixEnd = rangeEnd(this.prefixKey);
  }

  key(kind: StoredKind, name: string): Buffer {
    return Buffer.from(`${this.prefix}${kind}/${name}`);
  }

  kindRange(kind: StoredKind): { key: Buffer; range_end: Buffer } {
    const key = Buffer.from(`${this.prefix}${kind}/`);
    return { key, range_end: rangeEnd(key) };
  }

  /** The kind and name of a key under the prefix; undefined for a key mcplane did not write. */
  parse(key: Buffer): { kind: StoredKind; name: string } | undefined {
    const text = key.toString();
    if (!text.startsWith(this.prefix)) return undefined;
    const rest = text.slice(this.prefix.length);
    const slash = rest.indexOf('/');
    const kind = rest.slice(0, slash);
    if (slash <= 0 || !KINDS.has(kind)) return undefined;
    return { kind: kind as StoredKind, name: rest.slice(slash + 1) };
  }

  /** The object a key-value pair holds; resourceVersion is the given revision when set. */
  toObject<T>(kv: KeyValue, resourceVersion?: string): StoredObject<T> | undefined {
    const id = this.parse(kv.key);
    if (!id) return undefined;
    const envelope = decodeEnvelope(kv.value);
    const object: StoredObject<T> = {
      kind: id.kind,
      name: id.name,
      value: envelope.value as T,
      resourceVersion: resourceVersion ?? String(kv.mod_revision),
      createdAt: envelope.createdAt,
    };
    if (kv.lease && kv.lease !== '0') object.lease = String(kv.lease);
    return object;
  }
}

/** The stored bytes: JSON.stringify({ createdAt, value }), around the value's JSON text as given. */
export function encodeEnvelope(valueJson: string, createdAt: number): Buffer {
  return Buffer.from(`{"createdAt":${JSON.stringify(createdAt)},"value":${valueJson}}`);
}

export function decodeEnvelope(raw: Buffer): Envelope {
  const parsed = JSON.parse(raw.toString()) as Partial<Envelope>;
  return { createdAt: Number(parsed.createdAt ?? 0), value: parsed.value };
}

/** The first key after every key that starts with `prefix` (etcd's "prefix + 1"). */
export function rangeEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i] = end[i]! + 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

/** The smallest key after `key`, where the next page of a range starts. */
export function nextKey(key: Buffer): Buffer {
  return Buffer.concat([key, Buffer.from([0])]);
}
