// The server's launcher as the RPM installs it (scripts/package.ts writes it): it must run the
// bundled server with SERVER_NODE's V8 settings, which docs/sizing.md's "Memory per agent" credits
// with ~20 KiB per connected agent, and the server must still come up and serve under them. The
// same tree layout as the package (bin/ beside lib/mcplane/server/), with the real Node and the
// real server bundle linked in, so this runs without rpmbuild.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { connect } from '../../src/cli/client/connection.ts';
import { SERVER_NODE, wrapper } from '../../scripts/package.ts';
import { bundlePath, REPO_ROOT } from '../helpers/run-cli.ts';
import { testPki } from '../helpers/test-pki.ts';
import { scaled } from '../helpers/time-scale.ts';

test('the installed server launcher runs the server with SERVER_NODE\'s V8 settings, and it serves', { timeout: scaled(180_000) }, async () => {
  const pki = await testPki();
  const root = mkdtempSync(join(tmpdir(), 'server-launcher-'));
  mkdirSync(join(root, 'bin'));
  mkdirSync(join(root, 'lib/mcplane/server'), { recursive: true });
  writeFileSync(join(root, 'bin/mcplane-server'), wrapper('mcplane-server', 'server'), { mode: 0o755 });
  symlinkSync(process.execPath, join(root, 'lib/mcplane/server/node'));
  // Node runs a symlinked main module from its real path, so the bundle finds its proto files.
  symlinkSync(resolve(REPO_ROOT, bundlePath('mcplane-server')), join(root, 'lib/mcplane/server/mcplane-server.cjs'));
  const server = spawn(join(root, 'bin/mcplane-server'), ['--data-dir', join(root, 'data'), '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  server.stderr!.on('data', (d) => { stderr += d; });
  const exited = new Promise<void>((r) => server.once('exit', () => r()));
  try {
    const address = await new Promise<string>((ok, fail) => {
      createInterface({ input: server.stdout! }).on('line', (l) => {
        const m = /"grpc":"([^"]+)".*ready/.exec(l);
        if (m) ok(m[1]!);
      });
      server.once('exit', (code) => fail(new Error(`server exited ${code}: ${stderr}`)));
    });
    // The launcher execs Node, so the launched process is the server itself.
    const argv = readFileSync(`/proc/${server.pid}/cmdline`, 'utf8').split('\0');
    assert.ok(SERVER_NODE.flags.length > 0, 'the server launcher sets V8 flags');
    for (const flag of SERVER_NODE.flags) assert.ok(argv.includes(flag), `${flag} missing from ${argv.join(' ')}`);
    assert.ok(argv.indexOf(SERVER_NODE.flags[0]!) < argv.findIndex((a) => a.endsWith('mcplane-server.cjs')), 'the flags go to Node, not to the server');
    const c = connect({ server: address, pkiDir: pki.dir, config: '/dev/null' });
    try {
      const pools = await call(c, c.status.listPools.bind(c.status), {}, 'get');
      assert.ok(Array.isArray(pools.pools));
    } finally {
      c.close();
    }
  } finally {
    server.kill('SIGTERM');
    await exited;
    rmSync(root, { recursive: true, force: true });
  }
});
