import { controlCharacterViolation, quote } from './control-characters.ts';
import type { Problem } from './errors.ts';

type Json = unknown;

/**
 * Collects every problem found in one object, so a user sees all of them at once rather than
 * fixing one per round trip. The typed readers return undefined after reporting a wrong type,
 * which lets validation keep walking the rest of the document.
 */
export class ProblemCollector {
  readonly problems: Problem[] = [];
  /** What is valid and yet most likely not what the author meant: Apply answers with these. */
  readonly warnings: string[] = [];

  readonly object: string;
  readonly source?: string;
  constructor(object: string, source?: string) {
    this.object = object;
    this.source = source;
  }

  warn(message: string): void {
    this.warnings.push(message);
  }

  add(field: string, rule: string, message: string): void {
    const p: Problem = { object: this.object, field, rule, message };
    if (this.source !== undefined) p.source = this.source;
    this.problems.push(p);
  }

  /**
   * Prefixes the problems found since `since` with the entry they belong to, e.g. `file "/etc/a": `:
   * "storage.files[3]" alone makes a user count list entries in a config they may not have
   * written. Problems about the naming field itself already quote the name and are left alone.
   */
  /**
   * Prefixes the problems found since `since` with the entry's name. Callers ask only when
   * there is a problem (`problemsSince`): validation visits every file of every config and most
   * have none, so neither the label nor a closure building it is made for them (a closure per
   * file, with esbuild's keepNames wrapping each, cost the render benchmark about 15 %).
   */
  nameEntry(since: number, text: string, field: string): void {
    for (let i = since; i < this.problems.length; i++) {
      const p = this.problems[i]!;
      if (p.field !== field) p.message = `${text}: ${p.message}`;
    }
  }

  /** Whether problems were added since `since` (a count of problems taken before). */
  problemsSince(since: number): boolean {
    return this.problems.length > since;
  }

  get ok(): boolean {
    return this.problems.length === 0;
  }

  // The readers take the field as (base, key) and join them only when reporting: validation
  // runs for every file of every config, and most fields are fine. `index` is for an entry of a
  // list (`base[index].key`), so that its own path is not built for every entry either.

  record(value: Json, field: string, key?: string, index?: number): Record<string, Json> | undefined {
    if (value === undefined || value === null) return undefined;
    if (isRecord(value)) return value;
    this.add(fieldAt(field, key, index), 'type', `must be an object, got ${describe(value)}`);
    return undefined;
  }

  array(value: Json, field: string, key?: string, index?: number): Json[] | undefined {
    if (value === undefined || value === null) return undefined;
    if (Array.isArray(value)) return value;
    this.add(fieldAt(field, key, index), 'type', `must be a list, got ${describe(value)}`);
    return undefined;
  }

  string(value: Json, field: string, key?: string, index?: number): string | undefined {
    if (value === undefined || value === null) return undefined;
    if (typeof value === 'string') return value;
    this.add(fieldAt(field, key, index), 'type', `must be a string, got ${describe(value)}`);
    return undefined;
  }

  boolean(value: Json, field: string, key?: string, index?: number): boolean | undefined {
    if (value === undefined || value === null) return undefined;
    if (typeof value === 'boolean') return value;
    this.add(fieldAt(field, key, index), 'type', `must be true or false, got ${describe(value)}`);
    return undefined;
  }

  integer(value: Json, field: string, key?: string, index?: number): number | undefined {
    if (value === undefined || value === null) return undefined;
    if (typeof value === 'number' && Number.isInteger(value)) return value;
    this.add(fieldAt(field, key, index), 'type', `must be an integer, got ${describe(value)}`);
    return undefined;
  }

  stringList(value: Json, field: string, key?: string): string[] | undefined {
    const list = this.array(value, field, key);
    if (!list) return undefined;
    // A list of strings (nearly always) is copied at its size: push() would grow it to 16.
    let allStrings = true;
    for (let i = 0; i < list.length && allStrings; i++) allStrings = typeof list[i] === 'string';
    if (allStrings) return list.slice() as string[];
    const out: string[] = [];
    for (let i = 0; i < list.length; i++) {
      const item = list[i];
      if (typeof item === 'string') out.push(item);
      else this.string(item, `${join(field, key)}[${i}]`);
    }
    return out;
  }

  /** Reports keys outside `known`: a typo such as `kernelArgs` must not be silently ignored. */
  onlyKeys(value: Record<string, Json>, field: string, known: readonly string[], prefix?: string, index?: number): void {
    for (const key in value) {
      if (!known.includes(key)) {
        // A key is the sender's text: quote it where it could break a field path or a line.
        const safe = controlCharacterViolation(key) || key.length > 100 || /[.[\]"\s]/.test(key) ? `[${quote(key, 100)}]` : key;
        const base = fieldAt(field, prefix, index);
        this.add(safe === key ? join(base, key) : base + safe, 'unknown-field', `unknown field ${quote(key, 100)} (expected one of: ${known.join(', ')})`);
      }
    }
  }
}

export function isRecord(value: Json): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** True when a refused section is present with content; empty sections are harmless. */
export function isNonEmpty(value: Json): boolean {
  if (value === undefined || value === null) return false;
  if (Array.isArray(value)) return value.length > 0;
  if (isRecord(value)) return Object.keys(value).length > 0;
  return true;
}

export function join(base: string, key?: string): string {
  if (key === undefined) return base;
  return base ? `${base}.${key}` : key;
}

/** `base.key`, or `base[index].key` for an entry of the list at `base`. */
export function fieldAt(base: string, key?: string, index?: number): string {
  return join(index === undefined ? base : `${base}[${index}]`, key);
}

export function describe(value: Json): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') return `string ${JSON.stringify(value.length > 40 ? value.slice(0, 40) + '…' : value)}`;
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}
