import { stringify } from 'yaml';
import { ConfigurationError } from '../machineconfig/errors.ts';
import { checkJsonPath, renderJsonPath } from './jsonpath-template.ts';

/** What `render` prints. */
export type OutputFormat = 'yaml' | 'json';

/** What `get` prints: kubectl's -o values. */
export type GetFormat = { kind: 'table' | 'wide' | 'name' | 'yaml' | 'json' } | { kind: 'jsonpath'; template: string } | { kind: 'custom-columns'; columns: CustomColumn[] };

/** One column of -o custom-columns=HEADER:EXPR: a header and a JSONPath into the object. */
export interface CustomColumn { header: string; expr: string }

export function formatObject(value: unknown, format: OutputFormat): string {
  return format === 'json' ? json(value) : stringify(value, { lineWidth: 0 });
}

// JSON.stringify escapes the C0 controls but writes DEL, the C1 controls and the Unicode line
// separators and bidirectional controls as they are, and a terminal acts on some of them. Outside
// its strings JSON text is ASCII, so each can only be inside a string, where \uXXXX is the same
// character to every parser: the document stays exact and the terminal sees no control.
const JSON_UNESCAPED = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function json(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(JSON_UNESCAPED, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`) + '\n';
}

export function parseGetFormat(value: string | undefined): GetFormat {
  if (value === undefined) return { kind: 'table' };
  if (value === 'wide' || value === 'name' || value === 'yaml' || value === 'json') return { kind: value };
  const m = /^jsonpath=(.*)$/s.exec(value);
  if (m) {
    // A template quoted once too often by a shell or a script keeps working.
    const template = m[1]!.replace(/^'(.*)'$/s, '$1');
    checkJsonPath(template);
    return { kind: 'jsonpath', template };
  }
  const cc = /^custom-columns=(.*)$/s.exec(value);
  if (cc) return { kind: 'custom-columns', columns: parseCustomColumns(cc[1]!) };
  throw new ConfigurationError(`-o ${value}: unknown output format; use wide, name, yaml, json, jsonpath=TEMPLATE or custom-columns=HEADER:EXPR,...`);
}

/** kubectl's `NAME:.metadata.name,POOL:.pool`; an expression may be written {.x} or .x. */
export function parseCustomColumns(spec: string): CustomColumn[] {
  const columns = spec.split(',').map((part) => {
    const colon = part.indexOf(':');
    if (colon <= 0 || colon === part.length - 1) {
      throw new ConfigurationError(`-o custom-columns=${spec}: "${part}" is not HEADER:EXPR (e.g. custom-columns=NAME:.metadata.name,POOL:.pool)`);
    }
    const expr = part.slice(colon + 1).replace(/^\{(.*)\}$/s, '$1');
    checkJsonPath(`{${expr}}`);
    return { header: part.slice(0, colon), expr };
  });
  return columns;
}

/** A column's cell for one object: kubectl's <none> where the expression finds nothing. */
export function customCell(column: CustomColumn, object: unknown): string {
  const text = renderJsonPath(`{${column.expr}}`, object);
  return text === '' ? '<none>' : text;
}

/** --sort-by's expression, checked before any call. */
export function checkSortBy(expr: string): void {
  checkJsonPath(`{${expr.replace(/^\{(.*)\}$/s, '$1')}}`);
}

/** The value --sort-by orders by: numbers as numbers, anything else as text. */
export function sortKey(expr: string, object: unknown): string | number {
  const text = renderJsonPath(`{${expr.replace(/^\{(.*)\}$/s, '$1')}}`, object);
  const n = Number(text);
  return text !== '' && Number.isFinite(n) ? n : text;
}

/** One object (yaml, json or jsonpath) as printed on its own. */
export function formatOne(value: unknown, format: GetFormat): string {
  if (format.kind === 'json') return json(value);
  if (format.kind === 'yaml') return stringify(value, { lineWidth: 0 });
  if (format.kind === 'jsonpath') return renderJsonPath(format.template, value);
  throw new Error(`formatOne: ${format.kind} is a line format`);
}
