import { stringify } from 'yaml';

export type OutputFormat = 'yaml' | 'json';

export function formatObject(value: unknown, format: OutputFormat): string {
  return format === 'json' ? JSON.stringify(value, null, 2) + '\n' : stringify(value, { lineWidth: 0 });
}
