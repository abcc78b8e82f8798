// Two sandbox hosts' systemd user managers on one machine must not reach each other's units. A
// manager puts each unit's processes in a cgroup named after the unit below its own cgroup; two
// managers in the same cgroup share /app.slice/<unit>, so stopping a unit on one host used to kill
// the other host's processes of the same unit (their D-Bus daemons too, seen in the agent tests as
// "no reply from systemd within 25 s" when files ran side by side).

import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { canRunUserSystemd, startUserSystemd } from '../../sandbox/user-systemd.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';

const mainPid = (sd: { systemctl(...a: string[]): { stdout: string } }, unit: string) =>
  Number(sd.systemctl('show', '-P', 'MainPID', unit).stdout.trim());
/** Running, not a zombie: this machine's init reaps orphans late. */
const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
};

test('stopping a unit on one sandbox host leaves the same unit on another host running', { skip }, async () => {
  const [a, b] = await Promise.all([startUserSystemd(), startUserSystemd()]);
  try {
    for (const sd of [a, b]) {
      writeFileSync(join(sd.unitDir, 'same-name.service'), '[Service]\nExecStart=/bin/sleep 600\n');
      sd.systemctl('daemon-reload');
      assert.equal(sd.systemctl('start', 'same-name.service').status, 0);
    }
    const pidB = mainPid(b, 'same-name.service');
    assert.ok(pidB > 0 && alive(pidB));

    assert.equal(a.systemctl('stop', 'same-name.service').status, 0);
    // Give a stray kill the time it took before (it was immediate, within the stop job).
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(alive(pidB), "host b's process of the unit survives host a's stop");
    assert.equal(b.systemctl('is-active', 'same-name.service').stdout.trim(), 'active');
    assert.equal(mainPid(b, 'same-name.service'), pidB);
    // The bus of b still answers (its dbus-daemon shares a unit name with a's too).
    assert.equal(b.systemctl('is-system-running').status !== null, true);
    assert.notDeepEqual(a.cgroupDirs, b.cgroupDirs, 'each manager has a cgroup of its own');
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
  // Each manager's cgroup goes with it.
  for (const sd of [a, b]) for (const dir of sd.cgroupDirs) assert.equal(existsSync(dir), false, `${dir} removed`);
});

test("a crashed manager's units die with it and its cgroup is removed at stop", { skip }, async () => {
  const sd = await startUserSystemd();
  writeFileSync(join(sd.unitDir, 'long.service'), '[Service]\nExecStart=/bin/sleep 600\n');
  sd.systemctl('daemon-reload');
  assert.equal(sd.systemctl('start', 'long.service').status, 0);
  const pid = mainPid(sd, 'long.service');
  const procs = readFileSync(join(sd.cgroupDirs[0]!, 'app.slice/long.service/cgroup.procs'), 'utf8');
  assert.match(procs, new RegExp(`^${pid}$`, 'm'), "the unit's process lives below the manager's own cgroup");
  await sd.crash();
  assert.equal(alive(pid), false);
  await sd.restart();
  assert.equal(sd.systemctl('is-active', 'long.service').stdout.trim(), 'inactive');
  await sd.stop();
  for (const dir of sd.cgroupDirs) assert.equal(existsSync(dir), false, `${dir} removed`);
});
