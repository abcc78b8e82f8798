import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { resolveManagedPath } from '../../src/agent/host-paths.ts';

function root(): string {
  const r = mkdtempSync(join(tmpdir(), 'paths-'));
  mkdirSync(join(r, 'etc/sub'), { recursive: true });
  mkdirSync(join(r, 'var/usrlocal/bin'), { recursive: true });
  mkdirSync(join(r, 'usr'), { recursive: true });
  symlinkSync('../var/usrlocal', join(r, 'usr/local'));
  return r;
}

test('plain /etc and /var paths land where they say, missing directories included', () => {
  const r = root();
  assert.deepEqual(resolveManagedPath(r, '/etc/sub/a.conf'), { ok: true, hostPath: join(r, 'etc/sub/a.conf'), resolved: '/etc/sub/a.conf' });
  assert.deepEqual(resolveManagedPath(r, '/var/lib/new/dir/f'), { ok: true, hostPath: join(r, 'var/lib/new/dir/f'), resolved: '/var/lib/new/dir/f' });
});

test('/usr/local follows its link into /var', () => {
  const r = root();
  const res = resolveManagedPath(r, '/usr/local/bin/tool');
  assert.ok(res.ok);
  assert.equal(res.resolved, '/var/usrlocal/bin/tool');
  assert.equal(res.hostPath, join(r, 'var/usrlocal/bin/tool'));
});

test('a symlink that leads out of /etc and /var is never followed', () => {
  const r = root();
  symlinkSync('/usr/lib', join(r, 'etc/escape'));
  symlinkSync('../../usr', join(r, 'etc/sub/up'));
  for (const p of ['/etc/escape/x', '/etc/sub/up/x']) {
    const res = resolveManagedPath(r, p);
    assert.equal(res.ok, false, p);
    assert.match((res as { reason: string }).reason, /resolves to \/usr\/.*outside \/etc and \/var; refusing to follow a symlink/);
  }
});

test('/usr/local as a plain directory (not CoreOS) is refused with the reason', () => {
  const r = mkdtempSync(join(tmpdir(), 'paths-'));
  mkdirSync(join(r, 'usr/local/bin'), { recursive: true });
  const res = resolveManagedPath(r, '/usr/local/bin/tool');
  assert.equal(res.ok, false);
  assert.match((res as { reason: string }).reason, /outside \/etc and \/var on this host/);
});

test('a symlink loop is reported, not followed forever', () => {
  const r = root();
  symlinkSync('loop-b', join(r, 'etc/loop-a'));
  symlinkSync('loop-a', join(r, 'etc/loop-b'));
  assert.match((resolveManagedPath(r, '/etc/loop-a/x') as { reason: string }).reason, /too many levels of symbolic links/);
});
