// `-o jsonpath=TEMPLATE` with kubectl's template syntax: text with `{EXPR}` parts, `{"literal"}`,
// and `{range EXPR}...{end}`. Each EXPR (`.items[*].metadata.name`, `..name`, `@.x`,
// `.items[?(@.status=="True")]`) is a JSONPath evaluated by the jsonpath-plus library; several
// results print separated by spaces, as kubectl prints them.

import { JSONPath } from 'jsonpath-plus';
import { ConfigurationError } from '../machineconfig/errors.ts';

type Part = { text: string } | { expr: string } | { range: string; body: Part[] };

export function renderJsonPath(template: string, data: unknown): string {
  return evaluate(parse(template), data, template);
}

/** Checks a template before any call is made, so a typo costs no round trip. */
export function checkJsonPath(template: string): void {
  parse(template);
}

function parse(template: string): Part[] {
  const fail = (why: string): never => {
    throw new ConfigurationError(`-o jsonpath=${template}: ${why} (kubectl's syntax, e.g. {.items[*].metadata.name} or {range .items[*]}{.metadata.name}{"\\n"}{end})`);
  };
  const root: Part[] = [];
  const stack: Part[][] = [root];
  let i = 0;
  while (i < template.length) {
    const open = template.indexOf('{', i);
    if (open < 0) {
      stack.at(-1)!.push({ text: template.slice(i) });
      break;
    }
    if (open > i) stack.at(-1)!.push({ text: template.slice(i, open) });
    const close = findClose(template, open);
    if (close < 0) fail(`"{" at position ${open} is not closed`);
    const inner = template.slice(open + 1, close).trim();
    i = close + 1;
    if (inner.startsWith('"')) {
      try {
        stack.at(-1)!.push({ text: JSON.parse(inner) as string });
      } catch {
        fail(`${inner} is not a quoted string`);
      }
    } else if (inner.startsWith('range ')) {
      const body: Part[] = [];
      stack.at(-1)!.push({ range: toJsonPath(inner.slice(6).trim(), fail), body });
      stack.push(body);
    } else if (inner === 'end') {
      if (stack.length === 1) fail('{end} without {range}');
      stack.pop();
    } else {
      stack.at(-1)!.push({ expr: toJsonPath(inner, fail) });
    }
  }
  if (stack.length > 1) fail('{range} without {end}');
  return root;
}

/** The closing brace of the part opened at `open`, skipping braces inside quoted strings. */
function findClose(text: string, open: number): number {
  let quote = '';
  for (let i = open + 1; i < text.length; i++) {
    const ch = text[i];
    if (quote) {
      if (ch === '\\') i++;
      else if (ch === quote) quote = '';
    } else if (ch === '"' || ch === "'") quote = ch;
    else if (ch === '}') return i;
  }
  return -1;
}

/** kubectl writes `.a.b`, `@.x` and `.labels.topology\\.kubernetes\\.io/zone`; JSONPath wants `$.a.b` and `['topology.kubernetes.io/zone']`. */
function toJsonPath(expr: string, fail: (why: string) => never): string {
  let path: string;
  if (expr.startsWith('$') || expr.startsWith('@')) path = expr.slice(1);
  else if (expr.startsWith('.') || expr.startsWith('[')) path = expr;
  else return fail(`"${expr}" is not a path: it must start with "." (e.g. .metadata.name)`);
  return '$' + (path.includes('\\') ? bracketEscapedKeys(path) : path);
}

/** Rewrites each `.key` holding an escaped dot into `['key']`, leaving brackets alone. */
function bracketEscapedKeys(path: string): string {
  let out = '';
  let depth = 0;
  let segment: string | undefined;
  const flush = (): void => {
    if (segment === undefined) return;
    out += segment.includes('\\') ? `['${segment.replaceAll('\\', '').replaceAll("'", "\\'")}']` : `.${segment}`;
    segment = undefined;
  };
  for (let i = 0; i < path.length; i++) {
    const ch = path[i]!;
    if (depth === 0 && ch === '\\' && segment !== undefined) {
      segment += ch + (path[++i] ?? '');
    } else if (depth === 0 && ch === '.') {
      flush();
      if (path[i + 1] === '.') { out += '.'; i++; }
      segment = '';
    } else if (ch === '[' || ch === ']') {
      if (depth === 0) flush();
      depth += ch === '[' ? 1 : -1;
      out += ch;
    } else if (segment !== undefined && depth === 0) segment += ch;
    else out += ch;
  }
  flush();
  return out;
}

function query(path: string, data: unknown, template: string): unknown[] {
  try {
    return JSONPath({ path, json: data as object, wrap: true, eval: 'safe' }) as unknown[];
  } catch (err) {
    throw new ConfigurationError(`-o jsonpath=${template}: ${path}: ${(err as Error).message}`);
  }
}

function evaluate(parts: Part[], data: unknown, template: string): string {
  let out = '';
  for (const part of parts) {
    if ('text' in part) out += part.text;
    else if ('expr' in part) out += query(part.expr, data, template).map(show).join(' ');
    else for (const item of query(part.range, data, template)) out += evaluate(part.body, item, template);
  }
  return out;
}

function show(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  return typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
}
