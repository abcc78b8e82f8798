// TOML as MCO reads and writes it for CRI-O and containers files (registries.conf,
// registries.conf.d drop-ins, storage.conf, crio.conf.d drop-ins). MCO decodes with
// github.com/BurntSushi/toml and encodes with its Encoder; the generated files must read the same
// on a node, so the encoder below lays a document out as BurntSushi's does (key/values before
// sub-tables, a blank line before every top-level table and every [[array]] entry, two spaces of
// indent per nesting level, basic strings, `[a, b]` arrays). The reader takes TOML 1.0 apart from
// dates and times, which none of these files use (one is refused, not misread).
//
// No maintained TOML package is in node_modules: smol-toml (parse and stringify, no dependencies)
// is the one to add for reading; its writer's layout is not BurntSushi's, so the encoder stays.

import { TomlSyntaxError } from './errors.ts';

export type TomlValue = string | number | boolean | TomlValue[] | TomlTable;
export interface TomlTable { [key: string]: TomlValue | undefined }


const isTable = (v: unknown): v is TomlTable => v !== null && typeof v === 'object' && !Array.isArray(v);
const BARE_KEY = /^[A-Za-z0-9_-]+$/;

/** Parses a TOML document into plain objects (integers and floats both as numbers). */
export function parseToml(text: string): TomlTable {
  return new TomlReader(text).document();
}

class TomlReader {
  private pos = 0;
  private readonly root: TomlTable = {};
  /** Tables made by a [header] (may not be defined twice) and inline tables/arrays (closed to extension). */
  private readonly defined = new Set<TomlTable>();
  private readonly sealed = new Set<unknown>();
  private readonly tableArrays = new Set<TomlValue[]>();

  private readonly s: string;
  constructor(s: string) {
    this.s = s;
  }

  private line(): number {
    let n = 1;
    for (let i = 0; i < this.pos && i < this.s.length; i++) if (this.s[i] === '\n') n++;
    return n;
  }

  private fail(message: string): never {
    throw new TomlSyntaxError(message, this.line());
  }

  private skipSpace(): void {
    while (this.s[this.pos] === ' ' || this.s[this.pos] === '\t') this.pos++;
  }

  /** Spaces, newlines and comments (between array items and between statements). */
  private skipAll(): void {
    for (;;) {
      const ch = this.s[this.pos];
      if (ch === ' ' || ch === '\t' || ch === '\n' || ch === '\r') this.pos++;
      else if (ch === '#') this.skipComment();
      else return;
    }
  }

  private skipComment(): void {
    while (this.pos < this.s.length && this.s[this.pos] !== '\n') this.pos++;
  }

  /** After a statement: only spaces and a comment may follow on its line. */
  private endOfLine(): void {
    this.skipSpace();
    if (this.s[this.pos] === '#') this.skipComment();
    if (this.pos >= this.s.length) return;
    if (this.s[this.pos] === '\r' && this.s[this.pos + 1] === '\n') this.pos++;
    if (this.s[this.pos] !== '\n') this.fail(`unexpected ${JSON.stringify(this.s[this.pos])} after a value`);
    this.pos++;
  }

  document(): TomlTable {
    let current = this.root;
    for (;;) {
      this.skipAll();
      if (this.pos >= this.s.length) return this.root;
      if (this.s[this.pos] === '[') {
        const array = this.s[this.pos + 1] === '[';
        this.pos += array ? 2 : 1;
        this.skipSpace();
        const key = this.key();
        this.skipSpace();
        if (!this.s.startsWith(array ? ']]' : ']', this.pos)) this.fail(`expected ${array ? ']]' : ']'} to close the table header`);
        this.pos += array ? 2 : 1;
        this.endOfLine();
        current = array ? this.appendTableArray(key) : this.defineTable(key);
        continue;
      }
      this.keyValue(current);
      this.endOfLine();
    }
  }

  /** Walks to the table that holds `path`'s last key, making intermediate tables. */
  private descend(table: TomlTable, path: string[]): TomlTable {
    let t = table;
    for (const k of path) {
      let next = t[k];
      if (next === undefined) t[k] = next = {};
      if (Array.isArray(next) && this.tableArrays.has(next)) next = next[next.length - 1]!;
      if (!isTable(next) || this.sealed.has(next)) this.fail(`key ${k} is already defined as a value`);
      t = next as TomlTable;
    }
    return t;
  }

  private defineTable(key: string[]): TomlTable {
    const parent = this.descend(this.root, key.slice(0, -1));
    const last = key[key.length - 1]!;
    let t = parent[last];
    if (t === undefined) parent[last] = t = {};
    if (!isTable(t) || this.sealed.has(t) || this.defined.has(t)) this.fail(`table [${key.join('.')}] is defined twice`);
    this.defined.add(t as TomlTable);
    return t as TomlTable;
  }

  private appendTableArray(key: string[]): TomlTable {
    const parent = this.descend(this.root, key.slice(0, -1));
    const last = key[key.length - 1]!;
    let a = parent[last];
    if (a === undefined) {
      parent[last] = a = [];
      this.tableArrays.add(a);
    }
    if (!Array.isArray(a) || !this.tableArrays.has(a)) this.fail(`[[${key.join('.')}]] is already defined as a value`);
    const t: TomlTable = {};
    a.push(t);
    return t;
  }

  private keyValue(table: TomlTable): void {
    const key = this.key();
    this.skipSpace();
    if (this.s[this.pos] !== '=') this.fail(`expected = after key ${key.join('.')}`);
    this.pos++;
    this.skipSpace();
    const value = this.value();
    const parent = this.descend(table, key.slice(0, -1));
    const last = key[key.length - 1]!;
    if (parent[last] !== undefined) this.fail(`key ${key.join('.')} is defined twice`);
    parent[last] = value;
  }

  private key(): string[] {
    const parts: string[] = [];
    for (;;) {
      this.skipSpace();
      const ch = this.s[this.pos];
      if (ch === '"') parts.push(this.basicString());
      else if (ch === "'") parts.push(this.literalString());
      else {
        const start = this.pos;
        while (this.pos < this.s.length && /[A-Za-z0-9_-]/.test(this.s[this.pos]!)) this.pos++;
        if (start === this.pos) this.fail('expected a key');
        parts.push(this.s.slice(start, this.pos));
      }
      this.skipSpace();
      if (this.s[this.pos] !== '.') return parts;
      this.pos++;
    }
  }

  private value(): TomlValue {
    const ch = this.s[this.pos];
    if (ch === '"') return this.s.startsWith('"""', this.pos) ? this.multiLineBasic() : this.basicString();
    if (ch === "'") return this.s.startsWith("'''", this.pos) ? this.multiLineLiteral() : this.literalString();
    if (ch === '[') return this.array();
    if (ch === '{') return this.inlineTable();
    if (this.s.startsWith('true', this.pos)) { this.pos += 4; return true; }
    if (this.s.startsWith('false', this.pos)) { this.pos += 5; return false; }
    const m = /^[+-]?(?:inf|nan|0x[0-9A-Fa-f_]+|0o[0-7_]+|0b[01_]+|[0-9][0-9_]*(?:\.[0-9_]+)?(?:[eE][+-]?[0-9_]+)?)/.exec(this.s.slice(this.pos, this.pos + 100));
    if (!m) this.fail('expected a value');
    const text = m[0];
    if (/^\d{4}-|^\d{2}:/.test(this.s.slice(this.pos, this.pos + 5))) this.fail('dates and times are not supported');
    this.pos += text.length;
    const clean = text.replace(/_/g, '');
    if (/inf$/.test(clean)) return clean.startsWith('-') ? -Infinity : Infinity;
    if (/nan$/.test(clean)) return NaN;
    if (/^[+-]?0[xob]/.test(clean)) return Number(clean.replace(/^\+/, ''));
    return Number(clean);
  }

  private array(): TomlValue[] {
    this.pos++;
    const out: TomlValue[] = [];
    for (;;) {
      this.skipAll();
      if (this.s[this.pos] === ']') { this.pos++; break; }
      out.push(this.value());
      this.skipAll();
      if (this.s[this.pos] === ',') { this.pos++; continue; }
      if (this.s[this.pos] === ']') { this.pos++; break; }
      this.fail('expected , or ] in an array');
    }
    this.sealed.add(out);
    return out;
  }

  private inlineTable(): TomlTable {
    this.pos++;
    const t: TomlTable = {};
    this.skipSpace();
    if (this.s[this.pos] === '}') { this.pos++; this.sealed.add(t); return t; }
    for (;;) {
      this.skipSpace();
      this.keyValue(t);
      this.skipSpace();
      if (this.s[this.pos] === ',') { this.pos++; continue; }
      if (this.s[this.pos] === '}') { this.pos++; break; }
      this.fail('expected , or } in an inline table');
    }
    this.sealed.add(t);
    return t;
  }

  private basicString(): string {
    this.pos++;
    let out = '';
    for (;;) {
      const ch = this.s[this.pos];
      if (ch === undefined || ch === '\n') this.fail('unterminated string');
      if (ch === '"') { this.pos++; return out; }
      if (ch === '\\') out += this.escape();
      else { out += ch; this.pos++; }
    }
  }

  private escape(): string {
    const e = this.s[this.pos + 1];
    this.pos += 2;
    const simple: Record<string, string> = { b: '\b', t: '\t', n: '\n', f: '\f', r: '\r', '"': '"', '\\': '\\', e: '\x1b' };
    if (e !== undefined && e in simple) return simple[e]!;
    if (e === 'u' || e === 'U') {
      const n = e === 'u' ? 4 : 8;
      const hex = this.s.slice(this.pos, this.pos + n);
      if (!/^[0-9A-Fa-f]+$/.test(hex) || hex.length !== n) this.fail('bad unicode escape');
      this.pos += n;
      return String.fromCodePoint(parseInt(hex, 16));
    }
    return this.fail(`bad escape \\${e ?? ''}`);
  }

  private literalString(): string {
    const end = this.s.indexOf("'", this.pos + 1);
    const nl = this.s.indexOf('\n', this.pos + 1);
    if (end < 0 || (nl >= 0 && nl < end)) this.fail('unterminated string');
    const out = this.s.slice(this.pos + 1, end);
    this.pos = end + 1;
    return out;
  }

  private multiLineBasic(): string {
    this.pos += 3;
    if (this.s[this.pos] === '\r') this.pos++;
    if (this.s[this.pos] === '\n') this.pos++;
    let out = '';
    for (;;) {
      if (this.pos >= this.s.length) this.fail('unterminated string');
      if (this.s.startsWith('"""', this.pos)) {
        this.pos += 3;
        // Up to two quotes right before the closing delimiter belong to the string.
        for (let extra = 0; extra < 2 && this.s[this.pos] === '"'; extra++) { out += '"'; this.pos++; }
        return out;
      }
      const ch = this.s[this.pos]!;
      if (ch === '\\') {
        if (/^\\[ \t]*\r?\n/.test(this.s.slice(this.pos, this.pos + 100))) {
          this.pos++;
          while (/[ \t\r\n]/.test(this.s[this.pos] ?? '')) this.pos++;
        } else out += this.escape();
      } else { out += ch; this.pos++; }
    }
  }

  private multiLineLiteral(): string {
    let start = this.pos + 3;
    if (this.s[start] === '\r') start++;
    if (this.s[start] === '\n') start++;
    const end = this.s.indexOf("'''", start);
    if (end < 0) this.fail('unterminated string');
    let stop = end + 3;
    while (this.s[stop] === "'") stop++;
    this.pos = stop;
    return this.s.slice(start, stop - 3);
  }
}

// ---- writing, as BurntSushi/toml's Encoder does ------------------------------------------------

const INDENT = '  ';

/** Whether BurntSushi writes the value as a [table] / [[array of tables]] rather than key = value. */
function isSubTable(v: TomlValue): boolean {
  return isTable(v) || (Array.isArray(v) && v.length > 0 && v.every(isTable));
}

/**
 * Encodes `doc` with BurntSushi's layout. Keys are written in the object's order (build objects
 * in the Go struct's field order; sort the keys of what Go holds as a map); undefined values are
 * skipped, as Go's nil slices and maps and omitempty fields are.
 */
export function encodeToml(doc: TomlTable): string {
  const out: string[] = [];
  const written = (): boolean => out.length > 0;
  const newline = (): void => {
    if (written()) out.push('\n');
  };

  const writeTable = (path: string[], table: TomlTable): void => {
    const entries = Object.entries(table).filter((e): e is [string, TomlValue] => e[1] !== undefined);
    for (const [k, v] of entries) {
      if (isSubTable(v)) continue;
      const key = [...path, k];
      out.push(`${INDENT.repeat(key.length - 1)}${quoteKey(k)} = ${encodeValue(v)}\n`);
    }
    for (const [k, v] of entries) {
      if (!isSubTable(v)) continue;
      const key = [...path, k];
      const header = key.map(quoteKey).join('.');
      if (Array.isArray(v)) {
        for (const item of v) {
          newline();
          out.push(`${INDENT.repeat(key.length - 1)}[[${header}]]\n`);
          writeTable(key, item as TomlTable);
        }
      } else {
        if (key.length === 1) newline();
        out.push(`${INDENT.repeat(key.length - 1)}[${header}]\n`);
        writeTable(key, v as TomlTable);
      }
    }
  };
  writeTable([], doc);
  return out.join('');
}

function quoteKey(k: string): string {
  return BARE_KEY.test(k) ? k : quoteString(k);
}

function encodeValue(v: TomlValue): string {
  if (typeof v === 'string') return quoteString(v);
  if (typeof v === 'boolean') return String(v);
  if (typeof v === 'number') {
    if (Number.isInteger(v)) return String(v);
    if (Number.isNaN(v)) return 'nan';
    if (!Number.isFinite(v)) return v > 0 ? 'inf' : '-inf';
    return String(v);
  }
  if (Array.isArray(v)) return `[${v.map(encodeValue).join(', ')}]`;
  // An inline table inside an array (BurntSushi writes those inline too).
  return `{${Object.entries(v).filter(([, x]) => x !== undefined).map(([k, x]) => `${quoteKey(k)} = ${encodeValue(x!)}`).join(', ')}}`;
}

/** A TOML basic string with BurntSushi's escapes. */
function quoteString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\f') out += '\\f';
    else if (ch === '\r') out += '\\r';
    else if (c < 0x20 || c === 0x7f) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}
