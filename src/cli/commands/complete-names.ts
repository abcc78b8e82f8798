// `mcctl __complete WORDS...`: object names from the server for shell completion. The shells
// (completion.ts) pass the words typed so far, the word being completed last; this finds the verb
// and the resource type in them, lists that type's names with the connection flags typed on the
// same line, and prints those that start with the current word, one a line. It prints nothing,
// never an error, when it cannot tell or cannot reach the server: a completion must not spill
// messages into the line being edited.

import type { Clients, ConnectionFlags } from '../client/connection.ts';
import { RESOURCES, resourceOf, type ResourceName } from '../resources.ts';

/** Connection flags that take a value, as option keys. */
const VALUE_FLAGS: Record<string, keyof ConnectionFlags> = {
  '-s': 'server', '--server': 'server', '--pki-dir': 'pkiDir', '--ca': 'ca', '--cert': 'cert', '--key': 'key',
  '--request-timeout': 'requestTimeout', '--config': 'config', '--context': 'context',
};
/** Other flags of the verbs whose value must not be taken for a positional word. */
const OTHER_VALUE_FLAGS = new Set(['-o', '--output', '-l', '--selector', '--pool', '--node', '--for', '--timeout', '--sort-by', '--reason', '-f', '--filename']);

/** Verbs whose first argument is a resource type and second a name. */
const TYPED_VERBS = new Set(['get', 'describe', 'delete', 'pause', 'resume', 'confirm', 'label', 'approve', 'deny']);

export async function completeNames(words: string[], connect: (flags: ConnectionFlags) => Clients): Promise<string> {
  const current = words.at(-1) ?? '';
  const flags: ConnectionFlags = {};
  const positional: string[] = [];
  for (let i = 0; i < words.length - 1; i++) {
    const w = words[i]!;
    const eq = w.indexOf('=');
    const name = w.startsWith('-') && eq > 0 ? w.slice(0, eq) : w;
    if (VALUE_FLAGS[name] || OTHER_VALUE_FLAGS.has(name)) {
      const value = name !== w ? w.slice(eq + 1) : words[++i];
      // The current word is this flag's value: not an object name.
      if (i >= words.length - 1) return '';
      if (VALUE_FLAGS[name]) (flags as Record<string, string>)[VALUE_FLAGS[name]] = value!;
    } else if (w === '--insecure') flags.insecure = true;
    else if (!w.startsWith('-')) positional.push(w);
  }
  const [verb, ...rest] = positional;
  let resource: ResourceName | undefined;
  let prefix = '';
  let typed = current;
  try {
    if (current.includes('/')) {
      // TYPE/NAME: get pool/wor<TAB>, wait pool/<TAB>
      resource = resourceOf(current.slice(0, current.indexOf('/')));
      prefix = current.slice(0, current.indexOf('/') + 1);
      typed = current.slice(prefix.length);
    } else if (verb && TYPED_VERBS.has(verb) && rest.length >= 1 && (verb === 'get' || rest.length === 1)) {
      if (rest[0]!.includes(',')) return '';
      resource = resourceOf(rest[0]!);
    } else if (verb === 'node' && rest.length === 1 && (rest[0] === 'reapply' || rest[0] === 'revoke')) {
      resource = 'nodes';
    } else if (verb === 'label' && rest.length >= 2) {
      return '';
    }
  } catch {
    return '';
  }
  if (!resource) return '';
  flags.requestTimeout ??= '3';
  let c: Clients | undefined;
  try {
    c = connect(flags);
    const r = RESOURCES[resource];
    const names = (await r.list(c, {})).map((item: unknown) => r.nameOf(item));
    return names.filter((n) => n.startsWith(typed)).map((n) => `${prefix}${n}\n`).join('');
  } catch {
    return '';
  } finally {
    c?.close();
  }
}
