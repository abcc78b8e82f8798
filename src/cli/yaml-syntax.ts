// YAML syntax errors as an operator wants them: file:line:column, the offending line and a caret,
// without the yaml library's own wording of positions. Used for manifests (YAML 1.1, as
// Kubernetes reads them) and for mcctl's config file.

import { parseAllDocuments, type DocumentOptions, type ParseOptions, type SchemaOptions } from 'yaml';
import type { YamlSyntaxLocation } from '../machineconfig/index.ts';

export const MANIFEST_YAML_OPTIONS: ParseOptions & DocumentOptions & SchemaOptions = { version: '1.1', merge: true, uniqueKeys: true };

export function yamlSyntaxLocations(text: string, file: string, options: ParseOptions & DocumentOptions & SchemaOptions = {}): YamlSyntaxLocation[] {
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
    try {
      JSON.parse(text);
      return [];
    } catch { /* the YAML reader below says where */ }
  }
  const lines = text.split(/\r?\n/);
  const out: YamlSyntaxLocation[] = [];
  for (const doc of parseAllDocuments(text, options) as unknown as { errors: { message: string; linePos?: { line: number; col: number }[] }[] }[]) {
    for (const err of doc.errors ?? []) {
      const pos = err.linePos?.[0] ?? { line: 1, col: 1 };
      const message = err.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
      out.push({ file, line: pos.line, column: pos.col, message, sourceLine: lines[pos.line - 1] ?? '' });
    }
  }
  return out;
}
