// Bounding what a text's YAML may cost, on the pure reader: tokens before parsing, nodes with
// aliases expanded (counted, never expanded) and anchors before converting, one budget per request.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LineCounter, parseDocument } from 'yaml';
import { readDocuments } from '../../src/machineconfig/index.ts';
import { checkYamlDocument, YamlBudget } from '../../src/machineconfig/yaml-expansion.ts';

const flowList = (n: number): string => `[${Array(n).fill('0').join(',')}]`;
const aliased = (n: number, uses: number): string => `kind: MachineConfig\nmetadata: {name: bomb}\nspec:\n  a: &a ${flowList(n)}\n  b: [${Array(uses).fill('*a').join(',')}]\n`;
/** `levels` levels of ten aliases each: 10^levels nodes once expanded, in a few hundred bytes. */
const laughs = (levels: number): string => ['l0: &l0 [x,x,x,x,x,x,x,x,x,x]', ...Array.from({ length: levels - 1 }, (_, i) => `l${i + 1}: &l${i + 1} [${Array(10).fill(`*l${i}`).join(',')}]`)].join('\n') + '\n';

/** How long `f` ran, in this process's CPU time (milliseconds): other processes on the machine do not stretch it as they stretch the wall clock. */
function cpuTimed<T>(f: () => T): { value: T; ms: number } {
  const start = process.cpuUsage();
  const value = f();
  const used = process.cpuUsage(start);
  return { value, ms: (used.user + used.system) / 1000 };
}

test('a small document with anchors, aliases and merge keys reads as before', () => {
  const text = `base: &base {role: worker, tier: a}\nuse: *base\nboth: [*base, *base]\nmerged:\n  <<: *base\n  tier: b\nmore:\n  <<: [*base]\n  <<: {extra: 1}\n`;
  const { documents, problems } = readDocuments(text, 'ok.yaml');
  assert.deepEqual(problems, []);
  const v = documents[0]!.value as Record<string, unknown>;
  assert.deepEqual(v.use, { role: 'worker', tier: 'a' });
  assert.deepEqual(v.both, [{ role: 'worker', tier: 'a' }, { role: 'worker', tier: 'a' }]);
  assert.deepEqual(v.merged, { role: 'worker', tier: 'b' });
  assert.deepEqual(v.more, { role: 'worker', tier: 'a', extra: 1 });
});

test('the expanded size is counted in one pass, each alias at the memoized size of its anchor', () => {
  const doc = parseDocument('a: &a [1, 2, 3]\nb: &b [*a, *a]\nc: [*b, *b, *b]\n');
  const budget = new YamlBudget();
  assert.deepEqual(checkYamlDocument(doc, 'x#0', new LineCounter(), budget), []);
  // root 1, keys 3, a 4, b 1+4+4, c 1+9*3 (and nothing expanded to find it).
  assert.equal(budget.nodes, 1 + 3 + 4 + 9 + 28);
});

test('a billion laughs is refused before expansion, in milliseconds, naming the source, the alias and the limit', () => {
  const { value: { documents, problems }, ms } = cpuTimed(() => readDocuments(laughs(9), 'laughs.yaml'));
  assert.equal(documents.length, 0);
  assert.equal(problems.length, 1);
  const p = problems[0]!;
  assert.equal(p.rule, 'yaml-expansion');
  assert.equal(p.source, 'laughs.yaml#0');
  assert.match(p.message, /^the document has more than 100000 YAML nodes with its aliases expanded; alias \*l\d at line \d+, column \d+ alone stands for \d+ nodes\. One request may hold at most 100000 nodes/);
  assert.ok(ms < 1000, `${ms} ms of CPU`);
});

test("a big list aliased 99 times (under the library's maxAliasCount) is refused", () => {
  const { problems } = readDocuments(aliased(2000, 99), 'list.yaml');
  assert.deepEqual(problems.map((p) => [p.source, p.rule]), [['list.yaml#0', 'yaml-expansion']]);
  assert.match(problems[0]!.message, /alias \*a at line 5, column \d+ alone stands for 2001 nodes/);
  // The same list used a few times is fine.
  assert.deepEqual(readDocuments(aliased(2000, 3), 'list.yaml').problems, []);
});

test('the reported bomb, a 4.1M-element list aliased 99 times, is refused by counting tokens, before any tree is built', () => {
  const text = aliased(4_100_000, 99);
  const { value: { problems }, ms } = cpuTimed(() => readDocuments(text, 'huge.yaml'));
  assert.deepEqual(problems.map((p) => [p.source, p.rule]), [['huge.yaml#0', 'yaml-size']]);
  assert.match(problems[0]!.message, /^the YAML text has more than 100000 tokens by line 4; one request may hold at most 100000 YAML tokens/);
  assert.ok(ms < 3000, `${ms} ms of CPU`);
});

test('an alias inside the node its anchor names is refused, not followed', () => {
  const { problems } = readDocuments('kind: MachineConfig\nspec: &s {again: *s}\n', 'loop.yaml');
  assert.deepEqual(problems.map((p) => p.rule), ['yaml-expansion']);
  assert.match(problems[0]!.message, /alias \*s at line 2, column 18 is inside the node its anchor names/);
});

test('anchors and aliases are bounded: resolving each one costs a look at all before it', () => {
  const text = 'a:\n' + Array.from({ length: 400 }, (_, i) => `- &a${i} x\n- [*a${i}, *a${i}]`).join('\n') + '\n';
  const { problems } = readDocuments(text, 'anchors.yaml');
  assert.deepEqual(problems.map((p) => p.rule), ['yaml-expansion']);
  assert.match(problems[0]!.message, /^the YAML text has more than 1000 anchors and aliases, the last \*a333 at line 669; one request may use at most 1000/);
});

test('one budget covers every text of a request: a bomb split in pieces gains nothing', () => {
  const budget = new YamlBudget();
  const piece = aliased(1000, 60); // about 60,000 nodes each
  assert.deepEqual(readDocuments(piece, 'one.yaml', budget).problems, []);
  const second = readDocuments(piece, 'two.yaml', budget);
  assert.deepEqual(second.problems.map((p) => [p.source, p.rule]), [['two.yaml#0', 'yaml-expansion']]);
  assert.match(second.problems[0]!.message, /\(together with the manifests before it in this request\)/);
  // Later texts are not read at all, and not reported again.
  assert.deepEqual(readDocuments(piece, 'three.yaml', budget), { documents: [], problems: [] });
  // Each text on its own budget passes.
  assert.deepEqual(readDocuments(piece, 'two.yaml').problems, []);
});

test('duplicate keys are still refused, in linear time, and merge keys may repeat', () => {
  const { problems } = readDocuments('kind: MachineConfig\nmetadata: {name: a, name: b}\n', 'dup.yaml');
  assert.deepEqual(problems.map((p) => [p.rule, p.message]), [['yaml-syntax', 'Map keys must be unique at line 2, column 21']]);
  // 12,000 keys in one mapping took the library's pairwise check 2 s (20,000: 6 s). Linear time is
  // asserted against this run's own pace, not a wall-clock budget: six times the keys may cost
  // about six times as much (a pairwise check: up to thirty-six). Measured in this process's CPU time,
  // which other work on the machine does not stretch, after a warm-up (the first run compiles),
  // each size's best of three.
  const keys = (n: number) => Array.from({ length: n }, (_, i) => `k${i}: v`).join('\n') + '\nk7: again\n';
  const best = (n: number) => {
    const text = keys(n);
    const runs = Array.from({ length: 3 }, () => cpuTimed(() => readDocuments(text, 'many.yaml')));
    return { read: runs[0]!.value, ms: Math.min(...runs.map((r) => r.ms)) };
  };
  best(2_000);
  const small = best(2_000);
  const large = best(12_000);
  assert.deepEqual(large.read.problems.map((p) => p.message), ['Map keys must be unique at line 12001, column 1']);
  assert.ok(large.ms < 12 * small.ms, `12,000 keys took ${large.ms.toFixed(0)} ms of CPU, 2,000 took ${small.ms.toFixed(0)} ms: ${(large.ms / small.ms).toFixed(1)} times, where 6 is linear`);
});

test('a flood of syntax errors is reported by its first 20', () => {
  const { problems } = readDocuments(']'.repeat(1000), 'flood.yaml');
  assert.equal(problems.length, 21);
  assert.match(problems[0]!.message, /^Unexpected flow-seq-end token in YAML document: "\]" at line 1, column 1$/);
  assert.equal(problems[20]!.message, '… and 980 more syntax errors');
});
