// YAML written as MCO's Go writes it (yaml.v2 behind sigs.k8s.io/yaml and ghodss/yaml): the key
// order of yaml.v2's sorter.go, checked against the string keys of yaml.v2's TestSortedOutput,
// its quoting and its folding, checked against outputs yaml.v2 itself wrote (test/fixtures/go-yaml).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { goYamlKeyCompare, stringifyGoYaml } from '../../src/machineconfig/go-yaml.ts';

test('keys in yaml.v2\'s order: numbers by value, other characters before letters', () => {
  const order = ['', '.1', '.2', '.a', '1', '2', 'a!10', 'a/0001', 'a/002', 'a/3', 'a/10', 'a/11', 'a/0012', 'a/100', 'a~10', 'ab/1', 'b/1', 'b/01', 'b/2', 'b/02', 'b/3', 'b/03', 'b1', 'b01', 'b3', 'c2.10', 'c10.2', 'd1', 'd7', 'd7abc', 'd12', 'd12a'];
  const shuffled = [...order].reverse();
  assert.deepEqual(shuffled.sort(goYamlKeyCompare), order);
  assert.deepEqual(['mirror10.example.com', 'mirror9.example.com', '*.example.com'].sort(goYamlKeyCompare), ['*.example.com', 'mirror9.example.com', 'mirror10.example.com']);
});

test('strings quoted as yaml.v2 quotes them, and the text reads back as the value', () => {
  const value = { plain: 'hello world', zero: '0', yes: 'yes', empty: '', wildcard: '*.example.com', colon: 'a: b', time: '2001-12-14', lines: 'a\nb', list: ['x', 'true'], n: 1, b: false };
  const text = stringifyGoYaml(value);
  assert.equal(text, [
    'b: false', 'colon: \'a: b\'', 'empty: ""', 'lines: |-', '  a', '  b', 'list:', '- x', '- "true"', '"n": 1', 'plain: hello world', 'time: "2001-12-14"',
    'wildcard: \'*.example.com\'', '"yes": "yes"', 'zero: "0"', '',
  ].join('\n'));
  assert.deepEqual(parse(text, { version: '1.1' }), value);
});

test('every document of the yaml.v2 fixture is written byte for byte as yaml.v2 wrote it (quoting, escapes, key order, folding at column 80)', () => {
  const cases = JSON.parse(readFileSync(join(import.meta.dirname, '../fixtures/go-yaml/yaml-v2-outputs.json'), 'utf8')) as { json: string; yaml: string }[];
  assert.ok(cases.length >= 158);
  const differing = cases.filter((c) => stringifyGoYaml(JSON.parse(c.json)) !== c.yaml).map((c) => c.json.slice(0, 80));
  assert.deepEqual(differing, []);
});
