// YAML as MCO's Go writes it: sigs.k8s.io/yaml and ghodss/yaml marshal to JSON, then write that
// with yaml.v2 (kubelet.conf through EncodeKubeletConfig, sigstore-registries.yaml, the kubelet's
// credential provider config). A file that differs by a byte is a change a node applies (a
// kubelet.conf change reboots it), so yaml.v2's choices are followed where they differ from the
// yaml package's:
// - map keys in yaml.v2's order (sorter.go keyList.Less): numbers in keys by value
//   ("mirror9" before "mirror10"), and a letter after any other character;
// - quoting (encode.go stringv, emitterc.go analyze_scalar): double quotes for a string that
//   would read back as another type in YAML 1.1 (resolve.go: "0", "yes", "1:20", a date) or that
//   holds a tab or a control character, single quotes ("''" inside) where plain cannot be
//   written ("*.example.com", "it's: x"), a literal block for a multi-line string;
// - lines folded at a space past column 80 in plain and single-quoted values (emitterc.go
//   write_plain_scalar and write_single_quoted_scalar).
// - double quotes with yaml.v2's escapes (emitterc.go write_double_quoted_scalar) for a string
//   with a character it does not print: a control character, a tab, U+FEFF, U+FFFE/U+FFFF, or
//   anything outside the BMP ("\U0001F642"); folded at column 80 as well.
// Checked against yaml.v2 v2.4.0 itself (test/fixtures/go-yaml: outputs it wrote). Not followed,
// found by fuzzing against yaml.v2 and left because no config MCO writes has them: a key with a
// line break or over 128 characters (yaml.v2 writes an explicit "? key"), and a value with U+2028
// or U+2029 (it single-quotes it and writes the separator as a break).

import { Document, isScalar, parse, Scalar, visit, type Pair } from 'yaml';

const isLetter = (c: string): boolean => /\p{L}/u.test(c);
const isDigit = (c: string | undefined): boolean => c !== undefined && /\p{Nd}/u.test(c);
const digitValue = (c: string): number => c.charCodeAt(0) - 48;

/** yaml.v2 keyList.Less for two string keys. */
export function goYamlKeyLess(a: string, b: string): boolean {
  const ar = [...a];
  const br = [...b];
  for (let i = 0; i < ar.length && i < br.length; i++) {
    if (ar[i] === br[i]) continue;
    const al = isLetter(ar[i]!);
    const bl = isLetter(br[i]!);
    if (al && bl) return ar[i]! < br[i]!;
    if (al || bl) return bl;
    let an = 0;
    let bn = 0;
    if (ar[i] === '0' || br[i] === '0') {
      for (let j = i - 1; j >= 0 && isDigit(ar[j]); j--) {
        if (ar[j] !== '0') {
          an = 1;
          bn = 1;
          break;
        }
      }
    }
    let ai = i;
    let bi = i;
    for (; ai < ar.length && isDigit(ar[ai]); ai++) an = an * 10 + digitValue(ar[ai]!);
    for (; bi < br.length && isDigit(br[bi]); bi++) bn = bn * 10 + digitValue(br[bi]!);
    if (an !== bn) return an < bn;
    if (ai !== bi) return ai < bi;
    return ar[i]! < br[i]!;
  }
  return ar.length < br.length;
}

/** A comparator for yaml.v2's key order. */
export function goYamlKeyCompare(a: string, b: string): number {
  return goYamlKeyLess(a, b) ? -1 : goYamlKeyLess(b, a) ? 1 : 0;
}

/** resolve.go resolveMap: the plain scalars that are bools, nulls, special floats or a merge key. */
const RESOLVE_MAP = new Set([
  'y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON',
  'n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF',
  '', '~', 'null', 'Null', 'NULL', '.nan', '.NaN', '.NAN', '.inf', '.Inf', '.INF', '+.inf', '+.Inf', '+.INF', '-.inf', '-.Inf', '-.INF', '<<',
]);
const YAML_STYLE_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
const BASE60_FLOAT = /^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$/;
/** Go's strconv.ParseFloat syntax (decimal and hexadecimal, inf and nan). */
const GO_FLOAT = /^[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+|inf|infinity|nan)$/i;

/** strconv.ParseInt(s, 0, 64) or ParseUint(s, 0, 64) succeeds: Go's integer literal within 64 bits. */
function parsesAsGoInt(s: string): boolean {
  const m = /^([+-]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$/.exec(s);
  if (!m) return false;
  const digits = m[2]!;
  const value = /^0[0-7]+$/.test(digits) ? BigInt(`0o${digits.slice(1)}`) : BigInt(digits);
  return m[1] === '-' ? value <= 1n << 63n : value <= (1n << 64n) - 1n;
}

/** parseTimestamp: YYYY-M-D, with a time after "T", "t" or " " (a zone only after T or t). */
function parsesAsTimestamp(s: string): boolean {
  const m = /^(\d{4})-(\d{1,2})-(\d{1,2})(?:([Tt])(\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?(Z|[+-]\d{2}:\d{2})| (\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?)?$/.exec(s);
  if (!m) return false;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (month < 1 || month > 12 || day < 1 || day > new Date(Date.UTC(year, month, 0)).getUTCDate()) return false;
  const [h, min, sec] = m[4] ? [m[5], m[6], m[7]] : [m[10] ?? '0', m[11] ?? '0', m[12] ?? '0'];
  return Number(h) < 24 && Number(min) < 60 && Number(sec) < 60;
}

/**
 * Whether yaml.v2 writes `s` quoted because, plain, it would read back as another type: its
 * resolve() (a bool, null, number or timestamp in YAML 1.1) or isBase60Float ("1:20").
 */
function readsAsOtherType(s: string): boolean {
  if (s === '') return true;
  // resolve() looks a scalar up only when its first character hints at another type ("<<" does not).
  const c = s[0]!;
  if (!/[-+0-9yYnNtTfFoO~.]/.test(c)) return false;
  if (RESOLVE_MAP.has(s)) return true;
  if (c === '.') return GO_FLOAT.test(s);
  if (c === '+' || c === '-' || (c >= '0' && c <= '9')) {
    if (BASE60_FLOAT.test(s)) return true;
    if (parsesAsTimestamp(s)) return true;
    const plain = s.replaceAll('_', '');
    if (parsesAsGoInt(plain)) return true;
    if (YAML_STYLE_FLOAT.test(plain)) return true;
    if (/^-?0[bB][01]+$/.test(plain)) return true;
  }
  return false;
}

/** yaml.v2's best_width: plain and single-quoted values fold at a space once a line is past it. */
const BEST_WIDTH = 80;

/** yaml.v2's is_printable, per code point: what it writes as it is. */
function isPrintable(cp: number): boolean {
  return cp === 0x0a || (cp >= 0x20 && cp <= 0x7e) || (cp >= 0xa0 && cp <= 0xd7ff) || (cp >= 0xe000 && cp <= 0xfffd && cp !== 0xfeff);
}

/**
 * A string yaml.v2's analyze_scalar allows only double quotes for: one with a character it does
 * not print (special_characters), or a line that ends in a space (space_break).
 */
function onlyDoubleQuoted(value: string): boolean {
  if (value.includes(' \n')) return true;
  for (const c of value) if (!isPrintable(c.codePointAt(0)!)) return true;
  return false;
}

const NAMED_ESCAPES = new Map<number, string>([[0x00, '0'], [0x07, 'a'], [0x08, 'b'], [0x09, 't'], [0x0a, 'n'], [0x0b, 'v'], [0x0c, 'f'], [0x0d, 'r'], [0x1b, 'e'], [0x22, '"'], [0x5c, '\\'], [0x85, 'N'], [0xa0, '_'], [0x2028, 'L'], [0x2029, 'P']]);
const isBreak = (cp: number): boolean => cp === 0x0a || cp === 0x0d || cp === 0x85 || cp === 0x2028 || cp === 0x2029;

/**
 * yaml_emitter_write_double_quoted_scalar: `value` written from `column`, continuation lines at
 * `indent`; folded at a space past column 80 when `allowBreaks` (a value, not a key). Its is_bom
 * looks at the start of the value whatever the position, so after a leading U+FEFF every
 * character is escaped, as yaml.v2 does.
 */
function writeDoubleQuoted(value: string, column: number, indent: string, allowBreaks: boolean): string {
  const chars = [...value];
  const bom = value.startsWith('\ufeff');
  let out = '"';
  let col = column + 1;
  let spaces = false;
  chars.forEach((c, i) => {
    const cp = c.codePointAt(0)!;
    if (bom || !isPrintable(cp) || isBreak(cp) || c === '"' || c === '\\') {
      const named = NAMED_ESCAPES.get(cp);
      const [letter, digits]: [string, number] = cp <= 0xff ? ['x', 2] : cp <= 0xffff ? ['u', 4] : ['U', 8];
      const escape = `\\${named ?? letter + cp.toString(16).toUpperCase().padStart(digits, '0')}`;
      out += escape;
      col += escape.length;
      spaces = false;
    } else if (c === ' ') {
      if (allowBreaks && !spaces && col > BEST_WIDTH && i > 0 && i < chars.length - 1) {
        out += `\n${indent}`;
        col = indent.length;
        if (chars[i + 1] === ' ') {
          out += '\\';
          col++;
        }
      } else {
        out += c;
        col++;
      }
      spaces = true;
    } else {
      out += c;
      col++;
      spaces = false;
    }
  });
  return `${out}"`;
}

/**
 * A double-quoted scalar as yaml.v2 writes it: one only double quotes can hold is written again
 * by writeDoubleQuoted (yaml.v2's escapes and folding); otherwise the yaml package double-quotes
 * a string with a "'" in it where yaml.v2, which asks for double quotes only for strings that read
 * as another type, single-quotes it ("''" for each "'").
 */
function requoted(scalar: string, column: number, indent: string, allowBreaks: boolean): string {
  let value: string;
  try {
    value = parse(scalar, { version: '1.2' }) as string;
  } catch {
    return scalar; // not one whole scalar (the yaml package's line was not what is expected here)
  }
  if (onlyDoubleQuoted(value)) return writeDoubleQuoted(value, column, indent, allowBreaks);
  const inner = scalar.slice(1, -1);
  if (inner.includes('\\') || readsAsOtherType(inner)) return scalar;
  return `'${inner.replaceAll("'", "''")}'`;
}

/**
 * yaml_emitter_write_plain_scalar and write_single_quoted_scalar's line breaks, on a line the yaml
 * package wrote unfolded: at the first space of a run, not followed by another, once the column
 * is past 80, the space becomes a new line indented two past the key (or the sequence dash) the
 * value belongs to. A double-quoted key or value is written again by writeDoubleQuoted (values
 * folded the same way); block values are left as they are.
 */
function foldLine(unfolded: string): string {
  let line = unfolded;
  let pos = 0;
  while (line[pos] === ' ') pos++;
  let owner = pos;
  while (line.startsWith('- ', pos)) {
    owner = pos;
    pos += 2;
  }
  let valueStart = pos;
  const quote = line[pos];
  if (quote === "'" || quote === '"') {
    // A quoted key ('*.x': ...), or a quoted value of a sequence item.
    let end = pos + 1;
    while (end < line.length) {
      if (quote === '"' && line[end] === '\\') end += 2; // an escape: \" does not end it
      else if (line[end] !== quote) end++;
      else if (quote === "'" && line[end + 1] === "'") end += 2;
      else break;
    }
    // A key is a simple key to yaml.v2: written on its line, never folded.
    const key = quote === '"' ? requoted(line.slice(pos, end + 1), [...line.slice(0, pos)].length, '', false) : line.slice(pos, end + 1);
    if (line[end + 1] === ':' && end + 2 === line.length) {
      // A key whose value is a block below it.
      return line.slice(0, pos) + key + ':';
    }
    if (line.startsWith(': ', end + 1)) {
      line = line.slice(0, pos) + key + line.slice(end + 1);
      owner = pos;
      valueStart = pos + key.length + 2;
    }
  } else {
    const colon = line.indexOf(': ', pos);
    if (colon >= 0) {
      owner = pos;
      valueStart = colon + 2;
    } else if (line.endsWith(':')) return line;
  }
  if (line[valueStart] === '"') line = line.slice(0, valueStart) + requoted(line.slice(valueStart), [...line.slice(0, valueStart)].length, ' '.repeat(owner + 2), true);
  const value = [...line.slice(valueStart)];
  const single = value[0] === "'";
  if (value.length === 0 || (!single && /^["|>{[]/.test(value[0]!))) return line;
  const chars = single ? [...line.slice(valueStart + 1, -1).replaceAll("''", "'")] : value;
  const indent = ' '.repeat(owner + 2);
  let column = [...line.slice(0, valueStart)].length + (single ? 1 : 0);
  let out = line.slice(0, valueStart) + (single ? "'" : '');
  let spaces = false;
  chars.forEach((c, i) => {
    if (c === ' ') {
      const inner = !single || (i > 0 && i < chars.length - 1);
      if (!spaces && column > BEST_WIDTH && chars[i + 1] !== ' ' && inner) {
        out += `\n${indent}`;
        column = indent.length;
      } else {
        out += c;
        column++;
      }
      spaces = true;
    } else {
      out += single && c === "'" ? "''" : c;
      column += single && c === "'" ? 2 : 1;
      spaces = false;
    }
  });
  return single ? `${out}'` : out;
}

/** `value` (JSON-like) as yaml.v2 writes it after a JSON round trip. */
export function stringifyGoYaml(value: unknown): string {
  const keyOf = (p: Pair): string => String(isScalar(p.key) ? p.key.value : p.key);
  // Keys are ordered as the nodes are made, so the order goes to the Document, not to toString.
  const doc = new Document(value, { version: '1.2', sortMapEntries: (a, b) => goYamlKeyCompare(keyOf(a), keyOf(b)) });
  visit(doc, {
    Scalar(_key, node: Scalar) {
      if (typeof node.value !== 'string') return;
      if (onlyDoubleQuoted(node.value)) node.type = Scalar.QUOTE_DOUBLE;
      else if (node.value.includes('\n')) node.type = Scalar.BLOCK_LITERAL;
      else if (readsAsOtherType(node.value)) node.type = Scalar.QUOTE_DOUBLE;
      else node.type = Scalar.PLAIN;
    },
  });
  const text = doc.toString({
    singleQuote: true, // where a plain scalar cannot be written, yaml.v2 single-quotes
    indentSeq: false,
    lineWidth: 0,
    // Every double-quoted scalar on one line, whatever its length, for requoted to read back.
    doubleQuotedMinMultiLineLength: Number.POSITIVE_INFINITY,
  });
  // Lines of block scalars (literal values) are left alone: they follow a line ending in "|" or
  // "|-", indented deeper than it.
  const lines = text.split('\n');
  let blockIndent = -1;
  return lines.map((line, i) => {
    const indent = line.length - line.trimStart().length;
    if (blockIndent >= 0 && (indent >= blockIndent || line === '')) {
      // A value that starts with a line break: the yaml package writes its leading empty lines
      // as indentation alone (its indentation is read from them); yaml.v2 writes them empty and
      // says the indentation in the header instead (below).
      return leadingBlankLine(lines, i) ? '' : line;
    }
    blockIndent = /: [|>]\d?[-+]?$|^ *(- )+[|>]\d?[-+]?$/.test(line) ? indent + 1 : -1;
    // yaml_emitter_write_block_scalar_hints: an indentation indicator of best_indent (2) when the
    // value starts with a line break (the yaml package writes one itself when it starts with a space).
    if (blockIndent >= 0 && /^ +$/.test(lines[i + 1] ?? '')) return line.replace(/\|([-+]?)$/, '|2$1');
    return foldLine(line);
  }).join('\n');
}

/** Whether lines[i] is one of the blank lines a block scalar starts with (only spaces, up to its header). */
function leadingBlankLine(lines: readonly string[], i: number): boolean {
  for (let j = i; j >= 0; j--) {
    if (/[|>]\d?[-+]?$/.test(lines[j]!) && !/^ *$/.test(lines[j]!)) return true;
    if (!/^ +$/.test(lines[j]!)) return false;
  }
  return false;
}
