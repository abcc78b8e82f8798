// mcctl where an oc user reaches for oc's habits (issue 21): rendered configs among `get mc`,
// -o custom-columns, --sort-by, --show-labels, contexts, --request-timeout, short usage errors,
// Examples in every help, fish completion and names completed from the server. Against a real
// server over TLS, through the mcctl program as an operator runs it.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { programArgs, REPO_ROOT, runAsync, runCliAsync } from '../helpers/run-cli.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
let conn: string[];
const agents: SimulatedAgent[] = [];
const dir = mkdtempSync(join(tmpdir(), 'mcctl-oc-'));
before(async () => {
  server = await startTestServer();
  conn = ['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null'];
  for (const [name, zone, autoDone] of [['w1', 'z2', true], ['w2', 'z1', true], ['fresh', 'z1', false]] as const) {
    const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name), name, autoDone, labels: { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': zone } });
    await agent.connect();
    agents.push(agent);
  }
  const applied = await mcctl('apply', '-f', 'examples');
  assert.equal(applied.status, 0, applied.stderr);
  await agents[0]!.waitFor(() => agents[0]!.status?.currentConfig?.startsWith('rendered-worker-') ?? false);
});
after(async () => {
  for (const a of agents) a.close();
  await server.close();
});

const mcctl = (...args: string[]) => runCliAsync([...conn, ...args]);
const lines = (text: string): string[] => text.trimEnd().split('\n');

test('get mc lists the rendered configs with the others, and gets one by name', async () => {
  const r = await mcctl('get', 'mc');
  assert.equal(r.status, 0, r.stderr);
  const [header, ...rows] = lines(r.stdout);
  assert.deepEqual(header!.split(/\s+/), ['NAME', 'ROLE', 'GENERATEDBY', 'FILES', 'UNITS', 'KERNELARGUMENTS', 'AGE']);
  const names = rows.map((row) => row.split(/\s+/)[0]!);
  assert.deepEqual(names, [...names].sort(), 'by name, as oc lists them');
  assert.ok(names.includes('50-infra'));
  const worker = rows.find((row) => row.startsWith('rendered-worker-'));
  assert.match(worker ?? '', /^rendered-worker-[0-9a-f]{32}\s+worker\s+mcplane-server\s+\d+\s+\d+\s/);
  const renderedName = worker!.split(/\s+/)[0]!;
  const one = await mcctl('get', 'mc', renderedName);
  assert.equal(one.status, 0, one.stderr);
  assert.equal(lines(one.stdout).length, 2);
  const yaml = parse((await mcctl('get', 'machineconfig', renderedName, '-o', 'yaml')).stdout);
  assert.deepEqual([yaml.kind, yaml.metadata.name, yaml.metadata.annotations['mcplane.io/pool']], ['MachineConfig', renderedName, 'worker']);
  assert.equal((await mcctl('get', `mc/${renderedName}`, '-o', 'name')).stdout, `machineconfig/${renderedName}\n`);
  const missing = await mcctl('get', 'mc', 'rendered-worker-0000');
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /MachineConfig\/rendered-worker-0000 not found/);
});

test('-o custom-columns, --sort-by and --show-labels, as kubectl', async () => {
  const custom = await mcctl('get', 'nodes', '-o', 'custom-columns=NAME:.metadata.name,ZONE:{.metadata.labels.topology\\.kubernetes\\.io/zone},MISSING:.status.nothing', '--sort-by', '.metadata.labels.topology\\.kubernetes\\.io/zone');
  assert.equal(custom.status, 0, custom.stderr);
  assert.deepEqual(lines(custom.stdout).map((l) => l.split(/\s+/)), [['NAME', 'ZONE', 'MISSING'], ['fresh', 'z1', '<none>'], ['w2', 'z1', '<none>'], ['w1', 'z2', '<none>']]);
  const sorted = await mcctl('get', 'nodes', '--sort-by', '{.metadata.name}', '--no-headers');
  assert.deepEqual(lines(sorted.stdout).map((l) => l.split(/\s+/)[0]), ['fresh', 'w1', 'w2']);
  const labelled = await mcctl('get', 'node', 'w1', '--show-labels');
  assert.match(lines(labelled.stdout)[0]!, /\sAGE\s+LABELS$/);
  assert.match(lines(labelled.stdout)[1]!, /\snode-role\.kubernetes\.io\/worker=,topology\.kubernetes\.io\/zone=z2$/);
  const bad = await mcctl('get', 'nodes', '-o', 'custom-columns=NAME');
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /"NAME" is not HEADER:EXPR/);
});

test('contexts: several servers in the config file, get-contexts, use-context, --context', async () => {
  const file = join(dir, 'mcctl.yaml');
  writeFileSync(file, `# my servers\nrequestTimeout: 5\ncurrentContext: nowhere\ncontexts:\n  - name: nowhere\n    server: 127.0.0.1:1\n    pkiDir: ${server.pki.dir}\n  - name: lab\n    server: ${server.address}\n    pkiDir: ${server.pki.dir}\n`);
  const cfg = (...args: string[]) => runCliAsync(['--config', file, ...args]);
  assert.deepEqual(lines((await cfg('config', 'get-contexts')).stdout).map((l) => l.split(/\s+/)),
    [['CURRENT', 'NAME', 'SERVER', 'CREDENTIALS'], ['*', 'nowhere', '127.0.0.1:1', server.pki.dir], ['', 'lab', server.address, server.pki.dir]]);
  const other = await cfg('--context', 'lab', 'get', 'pools', '-o', 'name');
  assert.equal(other.status, 0, other.stderr);
  assert.match(other.stdout, /^machineconfigpool\/worker$/m);
  assert.equal((await cfg('get', 'pools', '--context', 'lab', '-o', 'name')).status, 0, 'after the verb too');
  assert.match((await cfg('get', 'pools')).stderr, /no connection to 127\.0\.0\.1:1/);
  assert.equal((await cfg('config', 'use-context', 'lab')).stdout, 'Switched to context "lab".\n');
  assert.match(readFileSync(file, 'utf8'), /^# my servers\n[\s\S]*^currentContext: lab$/m, 'the file keeps its comments');
  assert.equal((await runCliAsync(['config', 'current-context', '--config', file])).stdout, 'lab\n', 'the file after the verb, as kubectl config --kubeconfig');
  assert.equal((await cfg('get', 'pools', '-o', 'name')).status, 0);
  const unknown = await cfg('--context', 'prod', 'get', 'pools');
  assert.equal(unknown.status, 1);
  assert.match(unknown.stderr, /context "prod" is not in .* \(contexts: nowhere, lab\); list them with mcctl config get-contexts/);
  const fresh = join(dir, 'new', 'mcctl.yaml');
  assert.equal((await runCliAsync(['--config', fresh, 'config', 'set-context', 'here', '--server', server.address, '--pki-dir', server.pki.dir, '--current'])).stdout, 'Context "here" created and in use.\n');
  assert.equal((await runCliAsync(['--config', fresh, 'get', 'pools', '-o', 'name'])).status, 0);
});

test('--request-timeout is the limit on each call; --timeout there is its old name, with a warning', async () => {
  const ok = await mcctl('get', 'pools', '--request-timeout', '30s', '-o', 'name');
  assert.equal(ok.status, 0, ok.stderr);
  assert.equal(ok.stderr, '');
  const old = await mcctl('--timeout', '30', 'get', 'pools', '-o', 'name');
  assert.equal(old.status, 0, old.stderr);
  assert.match(old.stderr, /^warning: --timeout is --request-timeout now/);
  const bad = await mcctl('get', 'pools', '--request-timeout', 'soon');
  assert.match(bad.stderr, /--request-timeout soon: give a positive number of seconds or a duration/);
  // wait's --timeout is the whole wait, its calls limited apart.
  const waited = await mcctl('wait', 'pool/infra', '--for', 'condition=Degraded', '--timeout', '1s', '--request-timeout', '5');
  assert.equal(waited.status, 1);
  assert.match(waited.stderr, /1s/);
  assert.doesNotMatch(waited.stderr, /warning/);
});

test('a wrong flag prints one line and the usage; every help has Examples; the connection flags are in mcctl options', async () => {
  const r = await mcctl('get', 'pools', '--bogus');
  assert.equal(r.status, 1);
  assert.deepEqual(lines(r.stderr), ["error: unknown option '--bogus'", 'Usage: mcctl get [options] <resource...>', "See 'mcctl get --help' for usage and examples."]);
  assert.equal(r.stdout, '');
  // Every command, through its man page (generated from the same definitions as --help).
  const man = join(dir, 'man');
  const made = await runCliAsync(['__man', man]);
  assert.equal(made.status, 0, made.stderr);
  const pages = readdirSync(man);
  assert.ok(pages.length > 30 && pages.includes('mcctl.1') && pages.includes('mcctl-rollout-status.1'), pages.join(', '));
  for (const page of pages) assert.match(readFileSync(join(man, page), 'utf8'), /^\.SH EXAMPLES\n\.nf\n {4}\S/m, `${page} has examples`);
  const helps = await Promise.all([['get'], ['rollout', 'status'], ['config', 'use-context'], ['pki', 'ca', 'rotate']].map((words) => runCliAsync([...words, '--help'])));
  for (const help of helps) {
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, /\nExamples:\n {2}\S/);
    assert.doesNotMatch(help.stdout, /--pki-dir <dir>\s+use ca\.crt/, 'the connection flags are left to mcctl options');
  }
  const options = await runCliAsync(['options']);
  for (const flag of ['--server', '--status-server', '--pki-dir', '--ca', '--cert', '--key', '--insecure', '--request-timeout', '--config', '--context']) assert.match(options.stdout, new RegExp(`^  (-s, )?${flag}\\b`, 'm'));
});

test('a new host shows New, not Done; a reason\'s trailing newline is not shown', async () => {
  const r = await mcctl('get', 'node', 'fresh');
  assert.match(lines(r.stdout)[1]!, /^fresh\s+worker\s+New\s+/);
  // The new host (it applies nothing by itself here) fails its first update.
  const degraded = agents[2]!;
  degraded.report({ state: 'Degraded', phase: 'apply', reason: 'apply: exit status 1: cannot write /etc/x\n' });
  // The pool's status follows the node's report asynchronously: poll, bounded.
  let pool = '';
  for (const deadline = Date.now() + 15_000; Date.now() < deadline;) {
    pool = (await mcctl('describe', 'pool', 'worker')).stdout;
    if (/fresh \(Degraded/.test(pool)) break;
  }
  const described = await mcctl('describe', 'node', 'fresh');
  assert.match(described.stdout, /^Reason:\s+apply: exit status 1: cannot write \/etc\/x$/m);
  assert.match((await mcctl('get', 'node', 'fresh', '-o', 'wide')).stdout, /cannot write \/etc\/x$/m);
  // Nor in what quotes it: the pool's condition, and the stored status itself.
  assert.match(pool, /fresh \(Degraded: apply: exit status 1: cannot write \/etc\/x\)/);
  assert.equal(JSON.parse((await mcctl('get', 'node', 'fresh', '-o', 'json')).stdout).status.reason, 'apply: exit status 1: cannot write /etc/x');
  degraded.report({ state: 'Done', phase: 'done', reason: '' });
});

test('get nodes -w keeps later rows in the columns of the table', async () => {
  const child = spawn(process.execPath, [...programArgs('mcctl'), ...conn, 'get', 'nodes', '-w'], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const out: string[] = [];
  let wake: (() => void) | undefined;
  createInterface({ input: child.stdout }).on('line', (l) => { out.push(l); wake?.(); });
  const until = (pred: () => boolean) => new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out:\n${out.join('\n')}`)), 20_000);
    wake = () => { if (pred()) { clearTimeout(timer); resolve(); } };
    wake();
  });
  try {
    await until(() => out.length >= 4);
    agents[0]!.report({ state: 'Unreconcilable', phase: 'validate', reason: 'x' });
    await until(() => out.some((l) => /^w1\s+worker\s+Unreconcilable/.test(l)));
    const header = out[0]!;
    const changed = out.find((l) => /Unreconcilable/.test(l))!;
    for (const column of ['PHASE', 'CURRENTCONFIG', 'DESIREDCONFIG', 'CONNECTED', 'AGE']) {
      const at = header.indexOf(column);
      assert.ok(at > 0 && changed[at - 1] === ' ' && changed[at] !== ' ', `${column} at ${at}:\n${header}\n${changed}`);
    }
  } finally {
    child.kill('SIGTERM');
    agents[0]!.report({ state: 'Done', phase: 'done', reason: '' });
  }
});

/** An `mcctl` on PATH, as the shells call it by the name typed, and the connection flags to the test server. */
function mcctlOnPath(): { env: NodeJS.ProcessEnv; connection: string[] } {
  const bin = join(dir, 'bin');
  spawnSync('mkdir', ['-p', bin]);
  writeFileSync(join(bin, 'mcctl'), `#!/bin/sh\ncd ${REPO_ROOT} && exec ${process.execPath} ${programArgs('mcctl').join(' ')} "$@"\n`);
  chmodSync(join(bin, 'mcctl'), 0o755);
  return {
    env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
    connection: ['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null'],
  };
}

test('completion: bash completes object names from the server, and nothing without one', async () => {
  const { env, connection: c } = mcctlOnPath();
  const bashFile = join(dir, 'mcctl.bash');
  writeFileSync(bashFile, spawnSync('mcctl', ['completion', 'bash'], { env, encoding: 'utf8' }).stdout);
  // Asynchronous: the server answering the completions runs in this process.
  const bash = async (...words: string[]): Promise<string[]> => {
    const r = await run('bash', ['-c', `source ${bashFile}
COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _mcctl; printf '%s\\n' "\${COMPREPLY[@]}"`], env);
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.split('\n').filter(Boolean);
  };
  assert.deepEqual(await bash('mcctl', ...c, 'get', 'nodes', 'w'), ['w1', 'w2']);
  assert.deepEqual(await bash('mcctl', ...c, 'describe', 'pool', 'in'), ['infra']);
  assert.deepEqual(await bash('mcctl', ...c, 'wait', 'pool/wo'), ['pool/worker']);
  assert.deepEqual(await bash('mcctl', '--server', '127.0.0.1:1', '--pki-dir', server.pki.dir, '--config', '/dev/null', 'get', 'nodes', 'w'), [], 'nothing, and no error, without a server');
});

// scripts/test.sh installs fish; a run without it reports this test skipped, which fails the run.
const noFish = spawnSync('fish', ['--version']).status !== 0 && 'needs fish (Debian package fish)';
test('completion: fish loads the script and completes verbs, flags, values and names from the server', { skip: noFish }, async () => {
  const { env, connection: c } = mcctlOnPath();
  const fishFile = join(dir, 'mcctl.fish');
  writeFileSync(fishFile, spawnSync('mcctl', ['completion', 'fish'], { env, encoding: 'utf8' }).stdout);
  const complete = async (line: string): Promise<string[]> => {
    const r = await run('fish', ['--no-config', '-c', `source ${fishFile}; complete -C '${line}'`], env);
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.split('\n').filter(Boolean).map((l) => l.split('\t')[0]!);
  };
  assert.deepEqual(await complete('mcctl ro'), ['rollout']);
  assert.deepEqual(await complete('mcctl rollout '), ['status']);
  assert.deepEqual(await complete('mcctl get -o y'), ['yaml']);
  assert.ok((await complete('mcctl get --sh')).includes('--show-labels'));
  assert.deepEqual(await complete(`mcctl ${c.join(' ')} get mc 50-i`), ['50-infra']);
});

const run = (command: string, args: string[], env: NodeJS.ProcessEnv) => runAsync(command, args, { env });
