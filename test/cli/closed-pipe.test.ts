// `mcctl ... | head`: when the reader closes the pipe early, mcctl ends quietly, as Unix tools do,
// instead of dying on an unhandled EPIPE with a stack trace.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { programArgs, REPO_ROOT } from '../helpers/run-cli.ts';

test('a reader that closes the pipe after the first line: exit 0, nothing on stderr', async () => {
  // bash's `head -1` closes its end after one line; mcctl's help is longer than a pipe's first write.
  const child = spawn('bash', ['-c', `"$@" --help | head -1 >/dev/null; echo "exit=\${PIPESTATUS[0]}" >&2`, 'bash', process.execPath, ...programArgs('mcctl')], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  await new Promise((resolve) => child.on('close', resolve));
  assert.equal(stderr, 'exit=0\n', `mcctl's exit status and stderr: ${stderr}`);
});
