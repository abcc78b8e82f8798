// The logind Reboot() call has a deadline like every other D-Bus call: a system bus that accepts
// the connection and then never answers (a STAND-IN for a wedged bus: a unix socket that reads
// and says nothing) fails the reboot step with a clear cause instead of hanging it.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createRebooter } from '../../src/agent/reboot.ts';

test('logind Reboot(false) on a bus that never answers: rejected at the deadline, naming the call', { timeout: 20_000 }, async () => {
  const path = join(mkdtempSync(join(tmpdir(), 'mcplane-silent-bus-')), 'bus');
  const sockets: Socket[] = [];
  const silent = createServer((s) => { sockets.push(s); s.on('data', () => undefined); });
  await new Promise<void>((r) => silent.listen(path, r));
  const saved = process.env.DBUS_SYSTEM_BUS_ADDRESS;
  process.env.DBUS_SYSTEM_BUS_ADDRESS = `unix:path=${path}`;
  try {
    const start = Date.now();
    await assert.rejects(createRebooter({ method: 'logind' }, 1500).reboot(), /^Error: logind Reboot\(false\): no reply on the system bus within 1\.5s$/);
    assert.ok(Date.now() - start < 5000);
    assert.ok(sockets.length >= 1, 'the agent did connect to the bus');
  } finally {
    if (saved === undefined) delete process.env.DBUS_SYSTEM_BUS_ADDRESS;
    else process.env.DBUS_SYSTEM_BUS_ADDRESS = saved;
    for (const s of sockets) s.destroy();
    silent.close();
  }
});
