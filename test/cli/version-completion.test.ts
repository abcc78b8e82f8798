// mcctl version (client and, over GetServerInfo, server) and mcctl completion bash|zsh.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { programVersion, REPO_ROOT, runCliAsync } from '../helpers/run-cli.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';
import { VERSION } from '../../src/runtime/version.ts';

/** mcctl's own (a bundle's, or the source's); the in-process test server's is the source's. */
const CLIENT = programVersion(VERSION);

let server: TestServer;
before(async () => { server = await startTestServer(); });
after(async () => { await server.close(); });

test('version prints the client and the server version', async () => {
  const r = await runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', 'version']);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, `client: ${CLIENT}\nserver: ${VERSION} (at ${server.address}, replica ${server.address}, leader, store ${process.env.MCPLANE_TEST_STORE ?? 'sqlite'})\n`);
  const json = JSON.parse((await runCliAsync(['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', 'version', '-o', 'json'])).stdout);
  assert.deepEqual([json.clientVersion, json.serverVersion.version, json.serverVersion.store], [CLIENT, VERSION, process.env.MCPLANE_TEST_STORE ?? 'sqlite']);
});

test('version still prints the client version when the server is unreachable, and exits 1', async () => {
  const r = await runCliAsync(['--server', '127.0.0.1:1', '--pki-dir', server.pki.dir, '--request-timeout', '2', '--config', '/dev/null', 'version']);
  assert.equal(r.status, 1);
  const [client, serverLine] = r.stdout.split('\n');
  assert.equal(client, `client: ${CLIENT}`);
  assert.equal(serverLine, 'server: unreachable');
  // Why, once: on stderr, not also on stdout.
  assert.match(r.stderr, /^error: cannot get the server version: no connection to 127\.0\.0\.1:1 .*\n$/);
  assert.equal(r.stderr.split('\n').length, 2, r.stderr);
});

const script = (shell: string): string => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'completion', shell], { cwd: REPO_ROOT, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
};

test('completion bash: the script loads and completes verbs, nested verbs, flags, resources and -o values', () => {
  const mcctl = `${process.execPath} --import tsx src/cli/main.ts`;
  const loaded = spawnSync('bash', ['-c', `source <(${mcctl} completion bash); complete -p mcctl`], { cwd: REPO_ROOT, encoding: 'utf8' });
  assert.equal(loaded.status, 0, loaded.stderr);
  assert.equal(loaded.stdout, 'complete -F _mcctl mcctl\n');
  const file = join(mkdtempSync(join(tmpdir(), 'mcctl-completion-')), 'mcctl.bash');
  writeFileSync(file, script('bash'));
  const complete = (...words: string[]): string[] => {
    const r = spawnSync('bash', ['-c', `source ${file}
COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _mcctl; printf '%s\\n' "\${COMPREPLY[@]}"`], { cwd: REPO_ROOT, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.split('\n').filter(Boolean);
  };
  assert.deepEqual(complete('mcctl', 'ro'), ['rollout']);
  assert.deepEqual(complete('mcctl', 'rollout', ''), ['status']);
  assert.ok(complete('mcctl', '').includes('version') && complete('mcctl', '').includes('completion'));
  assert.deepEqual(complete('mcctl', 'get', 'nodes', '--sel'), ['--selector']);
  assert.deepEqual(complete('mcctl', '--server', 'x:1', 'get', '-o', ''), ['wide', 'name', 'yaml', 'json', 'jsonpath=']);
  assert.ok(complete('mcctl', 'get', '').includes('replicas'));
  assert.deepEqual(complete('mcctl', 'wait', 'pool/worker', '--f'), ['--for']);
  assert.deepEqual(complete('mcctl', 'completion', ''), ['bash', 'zsh', 'fish']);
});

test('completion zsh is generated from the same tree; an unknown shell is an error', async () => {
  const zsh = script('zsh');
  assert.match(zsh, /^#compdef mcctl/);
  assert.match(zsh, /'\/rollout'\) echo 'status' ;;/);
  assert.match(zsh, /compdef _mcctl mcctl/);
  // zsh itself is not installed here; bash reads the shared functions, which both shells run.
  assert.equal(spawnSync('bash', ['-n'], { input: zsh.replace(/^_mcctl\(\) \{[\s\S]*$/m, ''), encoding: 'utf8' }).status, 0);
  const bad = await runCliAsync(['completion', 'tcsh']);
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /unsupported shell "tcsh"; use bash, zsh or fish/);
});
