// mcctl config get-contexts | current-context | use-context | set-context: the contexts of the
// client config file, as kubectl keeps them in a kubeconfig. The file is edited in place through
// the YAML document model, so comments and the order of keys survive a use-context.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { isMap, isSeq, parseDocument, YAMLMap, type Document } from 'yaml';
import { ConfigurationError } from '../../machineconfig/index.ts';
import { configPathOf, readConfigFile, type ConnectionFlags } from '../client/connection.ts';
import { table } from '../format.ts';

export function getContextsCommand(flags: ConnectionFlags, headers: boolean, names: string[] = []): string {
  const path = configPathOf(flags);
  const file = existsSync(path) ? readConfigFile(path) : { defaults: {}, contexts: [] };
  const current = flags.context ?? process.env.MCPLANE_CONTEXT ?? file.currentContext;
  const missing = names.filter((n) => !file.contexts.some((c) => c.name === n));
  if (missing.length) throw new ConfigurationError(`context "${missing[0]}" is not in ${path}`);
  const shown = names.length ? file.contexts.filter((c) => names.includes(c.name)) : file.contexts;
  const credentials = (c: ConnectionFlags): string => (c.insecure ? '<insecure>' : c.pkiDir ?? c.cert ?? file.defaults.pkiDir ?? file.defaults.cert ?? '<none>');
  return table(['CURRENT', 'NAME', 'SERVER', 'CREDENTIALS'],
    shown.map((c) => [c.name === current ? '*' : '', c.name, c.server ?? file.defaults.server ?? '<none>', credentials(c)]), { headers });
}

export function currentContextCommand(flags: ConnectionFlags): string {
  const path = configPathOf(flags);
  const current = existsSync(path) ? readConfigFile(path).currentContext : undefined;
  if (!current) throw new ConfigurationError(`current-context is not set in ${path}`);
  return `${current}\n`;
}

export function useContextCommand(flags: ConnectionFlags, name: string): string {
  const path = configPathOf(flags);
  if (!existsSync(path)) throw new ConfigurationError(`config file ${path} does not exist: add a context first (mcctl config set-context NAME --server HOST:PORT --pki-dir DIR)`);
  const file = readConfigFile(path);
  if (!file.contexts.some((c) => c.name === name)) {
    throw new ConfigurationError(`no context exists with the name "${name}" in ${path}${file.contexts.length ? ` (contexts: ${file.contexts.map((c) => c.name).join(', ')})` : ''}`);
  }
  const doc = load(path);
  doc.set('currentContext', name);
  save(path, doc);
  return `Switched to context "${name}".\n`;
}

/** Adds a context or changes the keys given; the others stay. */
export function setContextCommand(flags: ConnectionFlags, name: string, keys: ConnectionFlags, current: boolean): string {
  const path = configPathOf(flags);
  const doc = existsSync(path) ? load(path) : parseDocument('{}');
  if (!isMap(doc.contents)) doc.contents = new YAMLMap() as never;
  let contexts = doc.get('contexts');
  if (!isSeq(contexts)) {
    doc.set('contexts', doc.createNode([]));
    contexts = doc.get('contexts');
  }
  const seq = contexts as { items: unknown[] };
  let entry = seq.items.find((i) => isMap(i) && i.get('name') === name) as YAMLMap | undefined;
  const created = !entry;
  if (!entry) {
    entry = doc.createNode({ name }) as YAMLMap;
    seq.items.push(entry);
  }
  for (const [k, v] of Object.entries(keys)) if (v !== undefined) entry.set(k, v);
  if (current) doc.set('currentContext', name);
  mkdirSync(dirname(path), { recursive: true });
  save(path, doc);
  // Read back through the strict reader: what was written must also be what mcctl accepts.
  readConfigFile(path);
  return `Context "${name}" ${created ? 'created' : 'modified'}${current ? ' and in use' : ''}.\n`;
}

function load(path: string): Document {
  const doc = parseDocument(readFileSync(path, 'utf8'));
  if (doc.errors.length) throw new ConfigurationError(`config file ${path}: ${doc.errors[0]!.message}`);
  return doc;
}

function save(path: string, doc: Document): void {
  // Credentials' paths, and a server to trust: only its owner should write or read it.
  writeFileSync(path, doc.toString(), { mode: 0o600 });
}
