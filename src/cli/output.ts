import { stringify } from 'yaml';
import { ConfigurationError } from '../machineconfig/index.ts';
import { checkJsonPath, renderJsonPath } from './jsonpath-template.ts';

/** What `render` prints. */
export type OutputFormat = 'yaml' | 'json';

/** What `get` prints: kubectl's -o values. */
export type GetFormat = { kind: 'table' | 'wide' | 'name' | 'yaml' | 'json' } | { kind: 'jsonpath'; template: string };

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
  throw new ConfigurationError(`-o ${value}: unknown output format; use wide, name, yaml, json or jsonpath=TEMPLATE`);
}

/** One object (yaml, json or jsonpath) as printed on its own. */
export function formatOne(value: unknown, format: GetFormat): string {
  if (format.kind === 'json') return json(value);
  if (format.kind === 'yaml') return stringify(value, { lineWidth: 0 });
  if (format.kind === 'jsonpath') return renderJsonPath(format.template, value);
  throw new Error(`formatOne: ${format.kind} is a line format`);
}
