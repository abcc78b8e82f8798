// What a node reports reaches the operator's terminal through mcctl: a reason (or a phase, a
// kernel argument, an update's reason) with a newline must not print a forged row, and escape
// sequences must not clear the screen or retitle the window. Run against a real server over TLS
// with the real mcctl, as an operator runs it; the node is a simulated agent whose reports carry
// the payloads. -o json stays exact (a program reads it).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { REPO_ROOT, runCliAsync, type CliResult } from '../helpers/run-cli.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

// A forged row under the real one, clear screen, an OSC window title ended by BEL, a C1 CSI
// (one character), a carriage return that would overwrite the line, and a right-to-left override.
const FORGED = 'n9   worker   Done   done   rendered-worker-0   rendered-worker-0   True   1s';
const EVIL = `disk full\n${FORGED}\x1b[2J\x1b]0;pwned\x07\u009b31m\rX\u202eevil`;
/** A raw control (any but the line feed that ends each line) or format character. */
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

let server: TestServer;
let agent: SimulatedAgent;
let conn: string[];
const mcctl = (...args: string[]): Promise<CliResult> => runCliAsync([...conn, ...args]);

before(async () => {
  server = await startTestServer();
  conn = ['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null'];
  agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('n1'), name: 'n1', labels: { 'node-role.kubernetes.io/worker': '' } });
  await agent.connect();
  const now = Date.now();
  agent.report({
    state: 'Degraded',
    phase: `apply\n${FORGED}`,
    reason: EVIL,
    lastDisruption: `reboot\x1b]0;pwned\x07`,
    os: { bootedImage: `quay.io/os@sha256:1\x1b[2J`, bootedChecksum: '', kernelArguments: ['quiet', `nosmt\n${FORGED}`], kernelType: 'default', extensions: [], stagedImage: '', fips: false },
    currentUpdate: { id: 'u1', fromConfig: '', toConfig: 'rendered-worker-x', startedUnixMs: now - 5000, endedUnixMs: 0, phases: [{ name: `drain\x1b[2J`, startedUnixMs: now - 4000, endedUnixMs: 0, source: 'agent' }], disruption: '', result: '', reason: EVIL },
  });
  // The report is stored, and the Degraded event (its message is the reason) recorded.
  for (let i = 0; ; i++) {
    const events = await mcctl('get', 'events', '-o', 'json');
    const node = await mcctl('get', 'node', 'n1', '-o', 'json');
    if (JSON.parse(node.stdout).status?.reason === EVIL && (JSON.parse(events.stdout).items as { reason: string }[]).some((e) => e.reason === 'Degraded')) break;
    if (i > 100) assert.fail(`the degraded report never showed: ${node.stdout} ${events.stdout}`);
    await new Promise((r) => setTimeout(r, 100));
  }
});
after(async () => {
  agent?.close();
  await server?.close();
});

/** A command that streams (get -w, watch), stopped once its output matches `done`. */
function streamUntil(args: string[], done: RegExp): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...conn, ...args], { cwd: REPO_ROOT });
    let out = '';
    const timer = setTimeout(() => child.kill('SIGINT'), 60_000);
    child.stdout.on('data', (d) => {
      out += d;
      if (done.test(out)) child.kill('SIGINT');
    });
    child.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    child.on('error', reject);
  });
}

/** No raw control in the output, and no line that is not one the command meant to print. */
function assertNoInjection(out: CliResult, what: string): void {
  assert.equal(out.status, 0, `${what}: ${out.stderr}`);
  const bad = out.stdout.split('\n').findIndex((line) => RAW_CONTROL.test(line));
  assert.equal(bad, -1, `${what}: a raw control character on line ${bad + 1}: ${JSON.stringify(out.stdout.split('\n')[bad])}`);
  assert.doesNotMatch(out.stdout, /^n9 /m, `${what}: the forged row was printed as a row`);
}

test('get nodes (-o wide, -w) shows a reason with newlines and escape sequences as visible escapes, on one row', async () => {
  const wide = await mcctl('get', 'nodes', '-o', 'wide');
  assertNoInjection(wide, 'get nodes -o wide');
  const lines = wide.stdout.trimEnd().split('\n');
  assert.equal(lines.length, 2, `a header and one row:\n${wide.stdout}`);
  assert.match(lines[1]!, /^n1\s+worker\s+Degraded\s+apply\\nn9 {3}worker/);
  assert.ok(lines[1]!.endsWith('disk full\\nn9   worker   Done   done   rendered-worker-0   rendered-worker-0   True   1s\\x1b[2J\\x1b]0;pwned\\x07\\x9b31m\\rX\\u202eevil'), lines[1]);
  // Columns still line up: the header's REASON starts where the row's reason does.
  assert.equal(lines[0]!.indexOf('REASON'), lines[1]!.indexOf('disk full'));

  // -w: the table, then a row per change; stopped once the node's row is out.
  const watched = await streamUntil(['get', 'nodes', '-w', '-o', 'wide'], /evil/);
  assertNoInjection({ status: 0, stdout: watched, stderr: '' }, 'get nodes -w');
  assert.equal(watched.trimEnd().split('\n').length, 2, watched);
});

test('describe node shows every reported string escaped: reason, phase, OS, the running update', async () => {
  const out = await mcctl('describe', 'node', 'n1');
  assertNoInjection(out, 'describe node');
  assert.match(out.stdout, /^Reason: {10}disk full\\nn9 {3}worker .*\\x1b\[2J\\x1b\]0;pwned\\x07\\x9b31m\\rX\\u202eevil$/m);
  assert.match(out.stdout, /^Phase: {11}apply\\nn9 /m);
  assert.match(out.stdout, /^Last Disruption: reboot\\x1b\]0;pwned\\x07$/m);
  assert.match(out.stdout, /^ {2}Kernel Arguments: {2}quiet nosmt\\nn9 /m);
  assert.match(out.stdout, /^ {2}Booted Image: {6}quay\.io\/os@sha256:1\\x1b\[2J$/m);
  assert.match(out.stdout, /^ {4}Result: {6}Running: disk full\\nn9 /m);
  assert.match(out.stdout, /^ {4}drain\\x1b\[2J {3}/m);
});

test('get events and mcctl watch show the reason in the message escaped, one row per event', async () => {
  const out = await mcctl('get', 'events');
  assertNoInjection(out, 'get events');
  const rows = out.stdout.trimEnd().split('\n').slice(1);
  // Every row is an event: LAST SEEN, TYPE, REASON, OBJECT...
  for (const row of rows) assert.match(row, /^\S+(?: \(x\d+ over \S+\))?\s+(Normal|Warning)\s+\S+\s+(node|pool)\/\S+/, row);
  assert.ok(rows.some((r) => /\s+Warning\s+Degraded\s+node\/n1\s+disk full\\nn9 /.test(r)), out.stdout);
  const wide = await mcctl('get', 'events', '-o', 'wide');
  assertNoInjection(wide, 'get events -o wide');
  // mcctl watch: the node's line quotes its reason, the event's line its message.
  const watched = await streamUntil(['watch', '--nodes', '--events'], /current state above/);
  assertNoInjection({ status: 0, stdout: watched, stderr: '' }, 'watch --nodes --events');
  assert.match(watched, /node\/n1 .* reason="disk full\\nn9 /);
  assert.match(watched, /EVENT {5}node\/n1 {2}Warning Degraded: disk full\\nn9 /);
});

test('errors that quote a node\'s reason (mcctl wait) escape it on stderr', async () => {
  const out = await mcctl('wait', 'pool/worker', '--for', 'condition=Updated', '--timeout', '20s');
  assert.equal(out.status, 1, out.stdout + out.stderr);
  assert.match(out.stderr, /node n1 is Degraded: disk full\\nn9 {3}worker .*\\x1b\[2J\\x1b\]0;pwned\\x07\\x9b31m\\rX\\u202eevil/);
  assert.doesNotMatch(out.stderr, RAW_CONTROL);
  assert.doesNotMatch(out.stderr, /^n9 /m);
  assertNoInjection({ ...out, status: 0 }, 'wait (stdout)');
});

test('-o json and -o yaml stay exact: the reason parses back byte for byte, and JSON holds no raw C1 control', async () => {
  const json = await mcctl('get', 'node', 'n1', '-o', 'json');
  assert.equal(JSON.parse(json.stdout).status.reason, EVIL);
  assert.doesNotMatch(json.stdout, RAW_CONTROL);
  const yaml = await mcctl('get', 'node', 'n1', '-o', 'yaml');
  assert.equal(parse(yaml.stdout).status.reason, EVIL);
});
