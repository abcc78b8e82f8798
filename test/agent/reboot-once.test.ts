// One reboot request per boot (issue 22 saw two within milliseconds after a health-gate
// rollback): a request that succeeded is not made again by this process; one that failed is.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createRebooter } from '../../src/agent/reboot.ts';

test('a reboot command that succeeded runs once however often the reboot is asked for', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'reboot-once-'));
  const log = join(dir, 'requests');
  const rebooter = createRebooter({ method: 'command', command: ['/bin/sh', '-c', `echo request >> ${log}`] } as never);
  await Promise.all([rebooter.reboot(), rebooter.reboot()]);
  await rebooter.reboot();
  assert.equal(readFileSync(log, 'utf8'), 'request\n');
});

test('a reboot command that failed is run again on the next request', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'reboot-once-'));
  const log = join(dir, 'requests');
  const fail = join(dir, 'fail');
  writeFileSync(fail, '');
  const rebooter = createRebooter({ method: 'command', command: ['/bin/sh', '-c', `echo request >> ${log}; if [ -e ${fail} ]; then rm ${fail}; exit 1; fi`] } as never);
  await assert.rejects(rebooter.reboot());
  await rebooter.reboot();
  await rebooter.reboot();
  assert.equal(readFileSync(log, 'utf8'), 'request\nrequest\n');
});
