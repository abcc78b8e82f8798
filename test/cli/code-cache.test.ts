// The packaged mcctl runs its program from a V8 code cache in the user's cache directory, made at
// the end of the first successful run of each verb (src/runtime/code-cache.ts). Exercised here
// through the real launcher and bundle: what it writes, where and with which modes, that a later
// run takes it, that a bad or foreign cache is never used, and that mcctl runs the same without
// one. NODE_DEBUG=mcctl makes the launcher say what it did with the cache.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { isAscii } from 'node:buffer';
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { bundlePath, REPO_ROOT } from '../helpers/run-cli.ts';

let work: string;
/** A copy of the packaged launcher and program (tests change the program's text). */
let launcher: string;

before(() => {
  work = mkdtempSync(join(tmpdir(), 'mcctl-code-cache-'));
  const bundle = join(REPO_ROOT, dirname(bundlePath('mcctl')));
  mkdirSync(join(work, 'bundle', 'mcctl'), { recursive: true });
  cpSync(join(bundle, 'mcctl.cjs'), join(work, 'bundle', 'mcctl.cjs'));
  cpSync(join(bundle, 'mcctl', 'main.cjs'), join(work, 'bundle', 'mcctl', 'main.cjs'));
  launcher = join(work, 'bundle', 'mcctl.cjs');
});
after(() => rmSync(work, { recursive: true, force: true }));

function mcctl(args: string[], cacheHome: string, env: NodeJS.ProcessEnv = {}, file = launcher) {
  const result = spawnSync(process.execPath, [file, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, XDG_CACHE_HOME: cacheHome, NODE_DEBUG: 'mcctl', MCCTL_NO_CODE_CACHE: '', ...env },
  });
  const cache = /code cache (\S+): (absent|accepted|rejected)/.exec(result.stderr);
  return { ...result, cacheFile: cache?.[1], cacheState: cache?.[2], written: /: written\n/.test(result.stderr) };
}

const codeCacheRoot = (home: string): string => join(home, 'mcplane', 'mcctl-code-cache');

test('the first successful run of a verb writes its cache (0600 in 0700 directories); the next run takes it and prints the same', () => {
  const home = join(work, 'first');
  const first = mcctl(['options'], home);
  assert.equal(first.status, 0, first.stderr);
  assert.match(first.stdout, /--request-timeout/);
  assert.equal(first.cacheState, 'absent');
  assert.ok(first.written, first.stderr);
  assert.equal(first.cacheFile, join(codeCacheRoot(home), readdirSync(codeCacheRoot(home))[0]!, 'options.v8'));
  assert.equal(statSync(first.cacheFile!).mode & 0o777, 0o600);
  assert.equal(statSync(dirname(first.cacheFile!)).mode & 0o777, 0o700);
  assert.equal(statSync(codeCacheRoot(home)).mode & 0o777, 0o700);
  assert.ok(statSync(first.cacheFile!).size > 100_000, 'the cache holds the code the run compiled');

  const second = mcctl(['options'], home);
  assert.equal(second.status, 0, second.stderr);
  assert.equal(second.cacheState, 'accepted');
  assert.equal(second.written, false);
  assert.equal(second.stdout, first.stdout);
  // Each verb has its own: `version` has not run yet.
  assert.equal(mcctl(['completion', 'bash'], home).cacheState, 'absent');
  assert.deepEqual(readdirSync(dirname(first.cacheFile!)).sort(), ['completion.v8', 'options.v8']);
});

test('a run that fails writes no cache (its code would be the error path\'s)', () => {
  const home = join(work, 'failed');
  const failed = mcctl(['get', 'pools', '--server', '127.0.0.1:1', '--insecure', '--config', '/dev/null', '--request-timeout', '2s'], home);
  assert.equal(failed.status, 1, failed.stderr);
  assert.match(failed.stderr, /error: /);
  assert.equal(failed.cacheState, 'absent');
  assert.equal(failed.written, false);
  assert.equal(existsSync(failed.cacheFile!), false);
});

test('a cache V8 refuses (garbage here) is replaced, and the run is unaffected', () => {
  const home = join(work, 'garbage');
  const made = mcctl(['options'], home);
  writeFileSync(made.cacheFile!, Buffer.alloc(4096, 0x5a));
  const refused = mcctl(['options'], home);
  assert.equal(refused.status, 0, refused.stderr);
  assert.equal(refused.cacheState, 'rejected');
  assert.equal(refused.stdout, made.stdout);
  assert.ok(refused.written, 'a new cache in its place');
  assert.equal(mcctl(['options'], home).cacheState, 'accepted');
});

test('a cache another user owns, or others could write, is not run (sudo -E keeps the user\'s XDG_CACHE_HOME)', { skip: process.getuid?.() !== 0 && 'needs root to give the file away' }, () => {
  const home = join(work, 'foreign');
  const made = mcctl(['options'], home);
  chownSync(made.cacheFile!, 65534, 65534);
  const foreign = mcctl(['options'], home);
  assert.equal(foreign.status, 0, foreign.stderr);
  assert.equal(foreign.stdout, made.stdout);
  assert.match(foreign.stderr, /ignored: owner 65534, mode 600/);
  assert.equal(foreign.cacheState, 'absent');
  assert.ok(foreign.written, 'its own in place of the foreign one');
  assert.equal(statSync(made.cacheFile!).uid, process.getuid!());
  chmodSync(made.cacheFile!, 0o666);
  const writable = mcctl(['options'], home);
  assert.match(writable.stderr, /ignored: owner 0, mode 666/);
  assert.equal(writable.cacheState, 'absent');
});

test('another build of the program never runs on this build\'s cache, even of the same length; its first cache removes the old', () => {
  const home = join(work, 'rebuilt');
  const original = mcctl(['--help'], home);
  assert.match(original.stdout, /Configure fleets of image-based Linux hosts/);
  assert.ok(original.written);
  // One letter changed: the same length, which is all V8 itself compares.
  const other = join(work, 'other');
  mkdirSync(join(other, 'mcctl'), { recursive: true });
  cpSync(launcher, join(other, 'mcctl.cjs'));
  const text = readFileSync(join(work, 'bundle', 'mcctl', 'main.cjs'), 'latin1');
  assert.ok(text.includes('Configure fleets of image-based'));
  writeFileSync(join(other, 'mcctl', 'main.cjs'), text.replace('Configure fleets of image-based', 'Configure Fleets of image-based'), 'latin1');
  const rebuilt = mcctl(['--help'], home, {}, join(other, 'mcctl.cjs'));
  assert.equal(rebuilt.status, 0, rebuilt.stderr);
  assert.equal(rebuilt.cacheState, 'absent', 'a cache directory of its own');
  assert.notEqual(dirname(rebuilt.cacheFile!), dirname(original.cacheFile!));
  assert.match(rebuilt.stdout, /Configure Fleets of image-based/);
  assert.deepEqual(readdirSync(codeCacheRoot(home)), [dirname(rebuilt.cacheFile!).split('/').at(-1)], 'the old build\'s caches are gone');
});

test('without a writable cache directory, or with MCCTL_NO_CODE_CACHE=1, mcctl runs the same and writes nothing', () => {
  const blocked = join(work, 'not-a-directory');
  writeFileSync(blocked, '');
  const unwritable = mcctl(['options'], blocked);
  assert.equal(unwritable.status, 0, unwritable.stderr);
  assert.match(unwritable.stdout, /--request-timeout/);
  assert.match(unwritable.stderr, /not written/);

  const home = join(work, 'disabled');
  const off = mcctl(['options'], home, { MCCTL_NO_CODE_CACHE: '1' });
  assert.equal(off.status, 0, off.stderr);
  assert.equal(off.stdout, unwritable.stdout);
  assert.match(off.stderr, /code cache \(none\)/);
  assert.equal(existsSync(codeCacheRoot(home)), false);
});

test('the program is ASCII, so the launcher hands it to V8 without decoding UTF-8', () => {
  assert.ok(isAscii(readFileSync(join(work, 'bundle', 'mcctl', 'main.cjs'))), 'a non-ASCII character crept in: write it as an escape (\\u00b5) in the source');
});
