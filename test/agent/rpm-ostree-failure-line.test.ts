// What a node's Degraded reason says when rpm-ostree fails: the line of its stderr that names the
// failure, through the real client running a real failing program.

import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { failureLine, RpmOstree } from '../../src/agent/rpm-ostree.ts';
import { createLogger } from '../../src/runtime/logger.ts';

test('rpm-ostree\'s own error line, an exception\'s line in a crash trace, else the first line', () => {
  assert.equal(failureLine('note: starting\nerror: Transaction failed: no space left\n'), 'error: Transaction failed: no space left');
  assert.equal(failureLine('node:fs:1073\n  return binding.open(\n         ^\n\nError: ENOENT: no such file or directory, open \'/run/state.json\'\n    at Object.openSync\n'), 'Error: ENOENT: no such file or directory, open \'/run/state.json\'');
  assert.equal(failureLine('something odd\nmore\n'), 'something odd');
  assert.equal(failureLine(''), '');
});

test('a program that crashes with a trace: the client\'s error names the exception', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcplane-rpm-ostree-'));
  const binary = join(dir, 'rpm-ostree');
  writeFileSync(binary, '#!/bin/sh\nprintf "node:fs:1073\\n  return binding.open(\\n\\nError: ENOENT: no such file, open /run/x\\n    at openSync\\n" >&2\nexit 1\n');
  chmodSync(binary, 0o755);
  const client = new RpmOstree(binary, createLogger({ level: 'silent' }));
  await assert.rejects(client.run(['status', '--json']), (err: Error) => {
    assert.equal(err.message, 'rpm-ostree status --json: Error: ENOENT: no such file, open /run/x');
    return true;
  });
});
