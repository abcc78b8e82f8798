// The D-Bus client against a real systemd user manager.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openBus, SystemdClient } from '../../src/agent/systemd-client.ts';
import { SystemdError } from '../../src/machineconfig/index.ts';
import { scaled } from '../helpers/time-scale.ts';
import { canRunUserSystemd, startUserSystemd, type UserSystemd } from '../../sandbox/user-systemd.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let sd: UserSystemd;
let client: SystemdClient;
before(async () => {
  if (skip) return;
  sd = await startUserSystemd();
  // Jobs of a user manager take seconds on a loaded machine; only the timeout test needs a short one.
  client = SystemdClient.connect(sd.busAddress, scaled(10_000));
});
after(async () => {
  if (skip) return;
  client.close();
  await sd.stop();
});

const unit = (name: string, body: string) => writeFileSync(join(sd.unitDir, name), body);

test('enable, start, restart, reload; states as systemd reports them', { skip }, async () => {
  unit('ok.service', '[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\nExecReload=/bin/true\n[Install]\nWantedBy=default.target\n');
  await client.reload();
  assert.equal(await client.unitFileState('ok.service'), 'disabled');
  const changes = await client.enableUnitFiles(['ok.service']);
  assert.equal(changes[0]!.type, 'symlink');
  assert.equal(await client.unitFileState('ok.service'), 'enabled');
  await client.startUnit('ok.service');
  assert.equal(await client.activeState('ok.service'), 'active');
  await client.restartUnit('ok.service');
  await client.reloadUnit('ok.service');
  await client.disableUnitFiles(['ok.service']);
  assert.equal(await client.unitFileState('ok.service'), 'disabled');
  assert.equal(await client.unitFileState('missing.service'), 'not-found');
});

test('a failed job names the method, the unit, the result and the unit state', { skip }, async () => {
  unit('bad.service', '[Service]\nType=oneshot\nExecStart=/bin/false\n');
  await client.reload();
  await assert.rejects(client.startUnit('bad.service'), (err: unknown) => {
    assert.ok(err instanceof SystemdError);
    assert.equal(err.message, 'StartUnit bad.service: job ended "failed" (unit is failed)');
    return true;
  });
});

test('a job that does not finish in time is reported as such', { skip }, async () => {
  unit('slow.service', '[Service]\nType=oneshot\nExecStart=/bin/sleep 600\n');
  await client.reload();
  const impatient = SystemdClient.connect(sd.busAddress, 3000);
  try {
    await assert.rejects(impatient.startUnit('slow.service'), /StartUnit slow\.service: job did not finish within 3s \(unit is activating\)/);
  } finally {
    impatient.close();
  }
  await client.stopUnit('slow.service');
});

test('mask stops nothing by itself; a masked unit refuses to start; unmask brings it back', { skip }, async () => {
  unit('m.service', '[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n');
  await client.reload();
  await client.startUnit('m.service');
  // A file in the unit directory blocks masking: that is why masked units get no contents.
  await assert.rejects(client.maskUnitFiles(['m.service']), /already exists/);
  const { unlinkSync } = await import('node:fs');
  unlinkSync(join(sd.unitDir, 'm.service'));
  await client.maskUnitFiles(['m.service']);
  await client.reload();
  assert.equal(await client.unitFileState('m.service'), 'masked');
  assert.equal(await client.activeState('m.service'), 'active', 'a masked unit keeps running until stopped');
  await client.stopUnit('m.service');
  await assert.rejects(client.startUnit('m.service'), SystemdError);
  await client.unmaskUnitFiles(['m.service']);
  assert.notEqual(await client.unitFileState('m.service'), 'masked');
});

test('a lost bus connection fails calls with a clear error instead of crashing', { skip }, async () => {
  const other = SystemdClient.connect(sd.busAddress, 3000);
  await other.subscribe();
  other.close();
  await assert.rejects(other.reload(), SystemdError);
});

test('a daemon-reload whose connection is lost mid-call is retried once on a new connection', { skip }, async () => {
  const buses: ReturnType<typeof openBus>[] = [];
  const other = new SystemdClient(() => {
    const bus = openBus(sd.busAddress);
    buses.push(bus);
    return bus;
    // A daemon-reload of a user manager takes seconds on a loaded machine: the budget only has
    // to be finite, since what is asserted is the second connection, not the time.
  }, scaled(10_000), scaled(10_000));
  await other.subscribe();
  const reloading = other.reload();
  // The socket goes away with the call in flight, and dbus-next says so as it does when the bus
  // closes the connection ('end' on its connection object).
  const conn = (buses[0] as unknown as { _connection: NodeJS.EventEmitter & { stream: { destroy(): void } } })._connection;
  conn.stream.destroy();
  conn.emit('end');
  await reloading;
  assert.equal(other.connections, 2, 'the retry ran on a new connection');
  other.close();
});

test('many calls at once (50 units) add no listener per call to the connection: no MaxListenersExceededWarning', { skip }, async () => {
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  try {
    const names = Array.from({ length: 50 }, (_, i) => `many-${i}.service`);
    const states = await Promise.all(names.map((n) => client.unitFileState(n)));
    assert.deepEqual(new Set(states), new Set(['not-found']));
    await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
  } finally {
    process.off('warning', onWarning);
  }
  assert.deepEqual(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning')), []);
});
