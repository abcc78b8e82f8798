// The CLI's side of manifest reading: files, directories (recursively) and stdin. Parsing and
// validation stay in the pure core.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ManifestReadError, readDocuments, YamlBudget, YamlSyntaxError, type Problem, type RawDocument, type YamlSyntaxLocation } from '../machineconfig/index.ts';
import { MANIFEST_YAML_OPTIONS, yamlSyntaxLocations } from './yaml-syntax.ts';

const MANIFEST_EXTENSIONS = ['.yaml', '.yml', '.json'];

export interface LoadedDocuments {
  documents: RawDocument[];
  problems: Problem[];
  /** The raw texts, for commands that send them to a server unchanged. */
  texts: { source: string; text: string }[];
}

/**
 * Reads every manifest under `paths`; "-" is stdin. Directories are walked in name order. A YAML
 * syntax error in any file stops here, naming file:line:column and showing the line, before
 * anything is validated or sent.
 */
export function loadManifestFiles(paths: string[]): LoadedDocuments {
  const out: LoadedDocuments = { documents: [], problems: [], texts: [] };
  const syntax: YamlSyntaxLocation[] = [];
  // The server bounds what one Apply's YAML may cost (tokens, nodes with aliases expanded); the
  // same budget here refuses the same files before anything is sent or rendered offline.
  const budget = new YamlBudget();
  for (const path of paths) {
    for (const file of expand(path)) {
      let text: string;
      try {
        text = file === '-' ? readFileSync(0, 'utf8') : readFileSync(file, 'utf8');
      } catch (err) {
        throw new ManifestReadError(file, err);
      }
      const source = file === '-' ? '<stdin>' : file;
      // Read first: it refuses an oversized text after counting its tokens, where the syntax
      // locator would parse all of it. Only a text with syntax problems is located.
      const { documents, problems } = readDocuments(text, source, budget);
      const bad = problems.some((p) => p.rule === 'yaml-syntax') ? yamlSyntaxLocations(text, source, MANIFEST_YAML_OPTIONS) : [];
      if (bad.length) {
        syntax.push(...bad);
        continue;
      }
      out.documents.push(...documents);
      out.problems.push(...problems);
      out.texts.push({ source, text });
    }
  }
  if (syntax.length) throw new YamlSyntaxError(syntax);
  return out;
}

function expand(path: string): string[] {
  if (path === '-') return [path];
  let stat;
  try {
    stat = statSync(path);
  } catch (err) {
    throw new ManifestReadError(path, err);
  }
  if (!stat.isDirectory()) return [path];
  const files: string[] = [];
  for (const entry of readdirSync(path, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const child = join(path, entry.name);
    if (entry.isDirectory()) files.push(...expand(child));
    else if (MANIFEST_EXTENSIONS.some((ext) => entry.name.endsWith(ext))) files.push(child);
  }
  return files;
}
