// docs/reference/flags.md is generated from the programs' flag definitions and agent.yaml's keys
// (scripts/gen-reference.ts); it must be what the generator prints now, so a flag changed in the
// code without regenerating the page fails here instead of leaving the docs behind.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { generateReference, REFERENCE_FILE } from '../../scripts/gen-reference.ts';

test('docs/reference/flags.md is what scripts/gen-reference.ts generates from the code', () => {
  const generated = generateReference();
  const committed = readFileSync(REFERENCE_FILE, 'utf8');
  assert.ok(committed === generated,
    'docs/reference/flags.md is out of date: run `node --import tsx scripts/gen-reference.ts` and commit it\n' +
    firstDifference(committed, generated));
  // Spot checks that the page carries what the issue asked for: every program and config file.
  for (const needle of ['| `--data-dir <dir>` | `dataDir` |', '### mcplane-server backup', '| `paths.stateDir` | `/var/lib/mcplane` |', '### mcctl rollout status', '### Connection flags']) {
    assert.ok(generated.includes(needle), needle);
  }
});

function firstDifference(a: string, b: string): string {
  const x = a.split('\n');
  const y = b.split('\n');
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if (x[i] !== y[i]) return `line ${i + 1}:\n  committed: ${x[i] ?? '<end>'}\n  generated: ${y[i] ?? '<end>'}`;
  }
  return '';
}
