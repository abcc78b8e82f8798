// The three patch types mcplane sends: JSON merge patch (RFC 7386), strategic merge patch
// (read as a merge patch: for the fields mcplane patches, labels, annotations, taints-free node
// spec fields and status maps, the two agree; lists are replaced whole), and JSON patch
// (RFC 6902). Server-side apply is refused with 415, as by a server without it.

import { isDeepStrictEqual } from 'node:util';
import { apiErrors } from './api-status.ts';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export function applyPatch(contentType: string, target: Json, patch: Json): Json {
  const type = contentType.split(';')[0]!.trim();
  if (type === 'application/merge-patch+json' || type === 'application/strategic-merge-patch+json') return mergePatch(target, patch);
  if (type === 'application/json-patch+json') return jsonPatch(target, patch);
  throw apiErrors.unsupportedMediaType(type);
}

export function mergePatch(target: Json, patch: Json): Json {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return structuredClone(patch);
  const out: { [key: string]: Json } = target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key] ?? null, value);
  }
  return out;
}

function jsonPatch(target: Json, operations: Json): Json {
  if (!Array.isArray(operations)) throw apiErrors.badRequest('json patch: the body must be a list of operations');
  let doc = structuredClone(target);
  for (const [i, op] of operations.entries()) {
    if (op === null || typeof op !== 'object' || Array.isArray(op) || typeof op.op !== 'string' || typeof op.path !== 'string') {
      throw apiErrors.badRequest(`json patch: operation ${i} needs "op" and "path"`);
    }
    const path = parsePointer(op.path);
    switch (op.op) {
      case 'add': doc = put(doc, path, structuredClone(op.value ?? null), 'add'); break;
      case 'replace': get(doc, path, op.path); doc = put(doc, path, structuredClone(op.value ?? null), 'replace'); break;
      case 'remove': get(doc, path, op.path); doc = remove(doc, path); break;
      case 'test':
        if (!isDeepStrictEqual(get(doc, path, op.path), op.value)) throw apiErrors.invalid('patch', op.path, [{ field: op.path, message: 'the "test" operation failed' }]);
        break;
      case 'move':
      case 'copy': {
        if (typeof op.from !== 'string') throw apiErrors.badRequest(`json patch: "${op.op}" needs "from"`);
        const from = parsePointer(op.from);
        const value = structuredClone(get(doc, from, op.from));
        if (op.op === 'move') doc = remove(doc, from);
        doc = put(doc, path, value, 'add');
        break;
      }
      default: throw apiErrors.badRequest(`json patch: unknown op "${op.op}"`);
    }
  }
  return doc;
}

function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw apiErrors.badRequest(`json patch: path "${pointer}" does not start with /`);
  return pointer.slice(1).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function get(doc: Json, path: string[], text: string): Json {
  let cur: Json = doc;
  for (const key of path) {
    if (Array.isArray(cur) && /^\d+$/.test(key) && Number(key) < cur.length) cur = cur[Number(key)]!;
    else if (cur !== null && typeof cur === 'object' && !Array.isArray(cur) && key in cur) cur = cur[key]!;
    else throw apiErrors.invalid('patch', text, [{ field: text, message: 'no such path in the object' }]);
  }
  return cur;
}

function put(doc: Json, path: string[], value: Json, mode: 'add' | 'replace'): Json {
  if (path.length === 0) return value;
  const parent = get(doc, path.slice(0, -1), '/' + path.slice(0, -1).join('/'));
  const key = path[path.length - 1]!;
  if (Array.isArray(parent)) {
    const index = key === '-' ? parent.length : Number(key);
    if (!Number.isInteger(index) || index > parent.length) throw apiErrors.badRequest(`json patch: bad array index ${key}`);
    if (mode === 'add') parent.splice(index, 0, value);
    else parent[index] = value;
  } else if (parent !== null && typeof parent === 'object') {
    parent[key] = value;
  } else {
    throw apiErrors.badRequest(`json patch: cannot add ${key} to a scalar`);
  }
  return doc;
}

function remove(doc: Json, path: string[]): Json {
  const parent = get(doc, path.slice(0, -1), '/' + path.slice(0, -1).join('/'));
  const key = path[path.length - 1]!;
  if (Array.isArray(parent)) parent.splice(Number(key), 1);
  else if (parent !== null && typeof parent === 'object') delete parent[key];
  return doc;
}
