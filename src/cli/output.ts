import { stringify } from 'yaml';
import { ConfigurationError } from '../machineconfig/index.ts';
import { checkJsonPath, renderJsonPath } from './jsonpath-template.ts';

/** What `render` prints. */
export type OutputFormat = 'yaml' | 'json';

/** What `get` prints: kubectl's -o values. */
export type GetFormat = { kind: 'table' | 'wide' | 'name' | 'yaml' | 'json' } | { kind: 'jsonpath'; template: string };

export function formatObject(value: unknown, format: OutputFormat): string {
  return format === 'json' ? JSON.stringify(value, null, 2) + '\n' : stringify(value, { lineWidth: 0 });
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
  if (format.kind === 'json') return JSON.stringify(value, null, 2) + '\n';
  if (format.kind === 'yaml') return stringify(value, { lineWidth: 0 });
  if (format.kind === 'jsonpath') return renderJsonPath(format.template, value);
  throw new Error(`formatOne: ${format.kind} is a line format`);
}
