// What one request may make the YAML reader do. The yaml library is correct but not built for
// hostile input: it spends about 10 µs and 1.5 KiB per node, so an 8 MiB text of `0,0,0,…` (4
// million nodes) took the server to 4 GB and blocked its event loop for half a minute before a
// single alias was looked at; and aliases multiply whatever survives that (a 4-million-element
// list aliased 99 times passes the library's own maxAliasCount heuristic and stands for 400
// million nodes in every later walk). Its duplicate-key check and its alias resolution are
// quadratic too (20,000 keys in one mapping: 6 s; 40,000 aliases: 145 s).
//
// So a text is measured in three steps, each bounded by what the step before let through:
//   1. its tokens, and among them its anchors and aliases, are counted with the library's lexer
//      (cheap, no tree), stopping as soon as the request's budget runs out; only a text that fits
//      is parsed into a tree at all;
//   2. each parsed document is walked once (O(nodes), iteratively, so depth cannot overflow the
//      stack) counting nodes with every alias at the size of its anchor's node (memoized, never
//      expanded), and checking duplicate keys with a Set per mapping (the library's check, which
//      compares each key with all before it, is switched off);
//   3. only then is it converted to plain values (toJS), which shares aliased values.
// The budget is per request (every manifest of one Apply together), so splitting a bomb into
// many small texts gains nothing.

import { isAlias, isCollection, isMap, isPair, isScalar, Lexer, type Document, type LineCounter } from 'yaml';
import type { Problem } from './errors.ts';

/** Lexer tokens (scalars, indicators, line breaks, indentation, comments) in one request's YAML. */
export const MAX_APPLY_YAML_TOKENS = 100_000;
/** YAML nodes in one request, every alias counted at the size of the node it stands for. */
export const MAX_APPLY_YAML_NODES = 100_000;
/** Anchors and aliases together in one request: resolving an alias costs one look at each before it. */
export const MAX_APPLY_YAML_ANCHORS = 1_000;

/** What the YAML of one request has used; shared by every text of the request. */
export class YamlBudget {
  tokens = 0;
  nodes = 0;
  anchors = 0;
  /** Set once a text broke a limit: the problem is reported once, later texts are not read. */
  exceeded = false;

  readonly maxTokens: number;
  readonly maxNodes: number;
  readonly maxAnchors: number;
  constructor(
    maxTokens: number = MAX_APPLY_YAML_TOKENS,
    maxNodes: number = MAX_APPLY_YAML_NODES,
    maxAnchors: number = MAX_APPLY_YAML_ANCHORS,
  ) {
    this.maxTokens = maxTokens;
    this.maxNodes = maxNodes;
    this.maxAnchors = maxAnchors;
  }
}

// The lexer's markers for "a document starts" and "a plain scalar follows"; they stand for no text.
const NON_SOURCE_TOKENS = new Set(['\u0002', '\u001f', '\u0018', '\ufeff']);

function lineAt(text: string, offset: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

function shared(budget: YamlBudget, used: number): string {
  return used > 0 ? ' (together with the manifests before it in this request)' : '';
}

/**
 * Counts the tokens of `text` against the budget before anything is parsed, stopping at the first
 * token past the limit: the cost is bounded by the limit, not by the text.
 */
export function checkYamlTokens(text: string, sourceName: string, budget: YamlBudget): Problem | undefined {
  const before = budget.tokens;
  const anchorsBefore = budget.anchors;
  let offset = 0;
  let document = 0;
  let inDocument = false;
  let afterScalarMarker = false;
  for (const token of new Lexer().lex(text)) {
    // Anchors (&a) and aliases (*a) are counted here too, so a text with too many is refused
    // before the (slow) parse; the token after a scalar marker is the scalar's text, not one.
    if (!afterScalarMarker && (token[0] === '&' || token[0] === '*') && ++budget.anchors > budget.maxAnchors) {
      budget.exceeded = true;
      return {
        source: `${sourceName}#${document}`, object: 'document', field: '', rule: 'yaml-expansion',
        message: `the YAML text has more than ${budget.maxAnchors} anchors and aliases${shared(budget, anchorsBefore)}, the last ${token} at line ${lineAt(text, offset)}; one request may use at most ${budget.maxAnchors}, since resolving each alias looks at every anchor before it`,
      };
    }
    afterScalarMarker = token === '\u001f';
    if (++budget.tokens > budget.maxTokens) {
      budget.exceeded = true;
      return {
        source: `${sourceName}#${document}`, object: 'document', field: '', rule: 'yaml-size',
        message: `the YAML text has more than ${budget.maxTokens} tokens${shared(budget, before)} by line ${lineAt(text, offset)}; one request may hold at most ${budget.maxTokens} YAML tokens (scalars, indicators, line breaks, comments), since reading YAML costs time and memory for each. Apply the manifests in several requests, or send them as JSON`,
      };
    }
    // Which document the token is in, only to name it (as the syntax problems do).
    if (token === '---') {
      if (inDocument) document++;
      inDocument = true;
    } else if (token === '...') {
      if (inDocument) document++;
      inDocument = false;
    } else if (!inDocument && token[0] !== '#' && token[0] !== '%' && token.trim() !== '' && !NON_SOURCE_TOKENS.has(token)) {
      inDocument = true;
    }
    if (!NON_SOURCE_TOKENS.has(token)) offset += token.length;
  }
  return undefined;
}

interface Frame {
  node: object;
  children: unknown[];
  next: number;
  /** The node's own expanded size so far (a collection counts itself, a pair does not). */
  size: number;
  /** Scalar key values seen so far, for a mapping. */
  keys?: Set<unknown>;
}

/**
 * Walks one parsed document: its size with aliases expanded (against the request's budget), and
 * duplicate keys. O(nodes) whatever the aliases stand for: an alias adds
 * the memoized size of its anchor's node. Empty when the document may be converted.
 */
export function checkYamlDocument(doc: Document.Parsed, source: string, lineCounter: LineCounter, budget: YamlBudget): Problem[] {
  const problems: Problem[] = [];
  const where = (node: unknown): string => {
    const start = (node as { range?: [number, number, number] }).range?.[0];
    if (start === undefined) return '';
    const { line, col } = lineCounter.linePos(start);
    return ` at line ${line}, column ${col}`;
  };
  const nodesBefore = budget.nodes;
  const anchors = new Map<string, object>();
  const sizes = new Map<object, number>();
  const open = new Set<object>();
  const stack: Frame[] = [];
  let refusal: Problem | undefined;

  const refuse = (message: string): void => {
    budget.exceeded = true;
    refusal = { source, object: 'document', field: '', rule: 'yaml-expansion', message };
  };
  const charge = (n: number, node: unknown): boolean => {
    budget.nodes += n;
    if (budget.nodes <= budget.maxNodes) return true;
    const how = isAlias(node) ? `; alias *${node.source}${where(node)} alone stands for ${n} nodes` : ` by the node${where(node)}`;
    refuse(`the document has more than ${budget.maxNodes} YAML nodes with its aliases expanded${shared(budget, nodesBefore)}${how}. One request may hold at most ${budget.maxNodes} nodes, each alias counted at the size of the node it repeats, since everything after parsing (validation, storage) sees the repeated copies. Write the repeated parts out, or apply them in several requests`);
    return false;
  };
  /** Enters a node: charges what it adds by itself and, unless it has children to visit, to its parent. */
  const enter = (node: unknown, parent: Frame | undefined): void => {
    if (node === null || node === undefined) return;
    let size = 1;
    if (isAlias(node)) {
      const target = anchors.get(node.source);
      if (target !== undefined && open.has(target)) {
        refuse(`alias *${node.source}${where(node)} is inside the node its anchor names, so it would repeat without end`);
        return;
      }
      // An unresolved alias counts as one node: toJS names it as a syntax problem.
      if (target !== undefined) size = sizes.get(target) ?? 1;
    } else {
      const anchor = (node as { anchor?: string }).anchor;
      // The last definition before an alias is the one it means.
      if (anchor) anchors.set(anchor, node as object);
      if (isPair(node)) {
        stack.push({ node, children: [node.key, node.value], next: 0, size: 0 });
        return;
      }
      if (isCollection(node)) {
        if (!charge(1, node)) return;
        if (anchor) open.add(node);
        stack.push({ node, children: node.items, next: 0, size: 1, ...(isMap(node) ? { keys: new Set<unknown>() } : {}) });
        return;
      }
      if (anchor) sizes.set(node as object, 1);
    }
    if (charge(size, node) && parent) parent.size += size;
  };

  enter(doc.contents, undefined);
  while (stack.length && !refusal) {
    const frame = stack.at(-1)!;
    if (frame.next < frame.children.length) {
      const child = frame.children[frame.next++];
      if (frame.keys && isPair(child) && isScalar(child.key)) {
        // The library's rule (keys are equal when their values are ===), in O(1) per key. Merge
        // keys (`<<`) are symbols, one per occurrence, and NaN equals nothing.
        const value = child.key.value;
        if (typeof value !== 'symbol' && !Number.isNaN(value)) {
          if (frame.keys.has(value)) problems.push({ source, object: 'document', field: '', rule: 'yaml-syntax', message: `Map keys must be unique${where(child.key)}` });
          else frame.keys.add(value);
        }
      }
      enter(child, frame);
      continue;
    }
    stack.pop();
    if (open.delete(frame.node) || (frame.node as { anchor?: string }).anchor) sizes.set(frame.node, frame.size);
    const parent = stack.at(-1);
    if (parent) parent.size += frame.size;
  }
  return refusal ? [refusal] : problems;
}
