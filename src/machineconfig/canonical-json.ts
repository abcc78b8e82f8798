import { createHash } from 'node:crypto';

/**
 * JSON with object keys sorted at every level and no whitespace: the same value gives the same
 * bytes on every machine and every run, whatever order its keys were built in.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    return value === undefined ? 'null' : JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i ? ',' : '') + canonicalJson(value[i]);
    return out + ']';
  }
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj).filter((k) => obj[k] !== undefined).sort();
  let out = '{';
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    out += (i ? ',' : '') + JSON.stringify(k) + ':' + canonicalJson(obj[k]);
  }
  return out + '}';
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
