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
  // mcctl's connection flags are hidden from each command's help (mcctl options lists them), so
  // a generator reading only visible options would leave this table empty.
  const connection = section(generated, '### Connection flags');
  for (const flag of ['-s, --server <host:port>', '--status-server <host:port>', '--pki-dir <dir>', '--ca <file>', '--cert <file>', '--key <file>', '--insecure', '--request-timeout <duration>', '--config <file>', '--context <name>']) {
    assert.match(connection, new RegExp(`^\\| \`${flag.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\` \\|`, 'm'), `the connection flag ${flag} is in the reference`);
  }
  const configKeys = section(generated, '### mcctl.yaml');
  for (const key of ['currentContext', 'contexts', 'timeout']) assert.ok(configKeys.includes(`| \`${key}\` |`), `mcctl.yaml key ${key}`);
  assert.doesNotMatch(generated, /### mcctl __/, 'hidden commands (__man, __complete) are not the user\'s');
});

/** The text from a heading to the next heading of the same or a higher level. */
function section(text: string, heading: string): string {
  const start = text.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `${heading} is in the reference`);
  const level = heading.split(' ')[0]!;
  const next = text.slice(start + heading.length + 2).search(new RegExp(`^#{1,${level.length}} `, 'm'));
  return next < 0 ? text.slice(start) : text.slice(start, start + heading.length + 2 + next);
}

function firstDifference(a: string, b: string): string {
  const x = a.split('\n');
  const y = b.split('\n');
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if (x[i] !== y[i]) return `line ${i + 1}:\n  committed: ${x[i] ?? '<end>'}\n  generated: ${y[i] ?? '<end>'}`;
  }
  return '';
}
