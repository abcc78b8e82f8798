// YAML as MCO's Go writes it: sigs.k8s.io/yaml and ghodss/yaml marshal to JSON, then write that
// with yaml.v2 (kubelet.conf through EncodeKubeletConfig, sigstore-registries.yaml). Two of
// yaml.v2's choices differ from the yaml package's defaults, and a file that differs by a byte is
// a change a node applies (a kubelet.conf change reboots it):
// - map keys in yaml.v2's order (sorter.go keyList.Less): numbers in keys by value
//   ("mirror9" before "mirror10"), and a letter after any other character;
// - strings quoted only where needed: double quotes for one that would read back as another
//   type under YAML 1.1 ("0", "yes", "1:20"), single quotes where a plain scalar cannot be
//   written ("*.example.com"), a literal block for one with a newline.

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

/** Whether yaml.v2 would resolve `s`, written plain, to something other than a string. */
function readsAsOtherType(s: string): boolean {
  if (s === '') return true; // null in YAML 1.1; yaml.v2 writes "" for the empty string
  try {
    const v: unknown = parse(s, { version: '1.1' });
    return v === null || typeof v === 'number' || typeof v === 'boolean' || v instanceof Date;
  } catch {
    return false;
  }
}

/** `value` (JSON-like) as yaml.v2 writes it after a JSON round trip. */
export function stringifyGoYaml(value: unknown): string {
  const keyOf = (p: Pair): string => String(isScalar(p.key) ? p.key.value : p.key);
  // Keys are ordered as the nodes are made, so the order goes to the Document, not to toString.
  const doc = new Document(value, { version: '1.1', sortMapEntries: (a, b) => goYamlKeyCompare(keyOf(a), keyOf(b)) });
  visit(doc, {
    Scalar(_key, node: Scalar) {
      if (typeof node.value !== 'string') return;
      if (node.value.includes('\n')) node.type = Scalar.BLOCK_LITERAL;
      else if (readsAsOtherType(node.value)) node.type = Scalar.QUOTE_DOUBLE;
      else node.type = Scalar.PLAIN;
    },
  });
  return doc.toString({
    singleQuote: true, // where a plain scalar cannot be written, yaml.v2 single-quotes
    indentSeq: false,
    lineWidth: 0,
  });
}
