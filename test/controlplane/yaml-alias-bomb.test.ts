// YAML that costs more to read than it weighs, sent to a real mcplane-server process over gRPC/TLS:
// each is refused with INVALID_ARGUMENT naming the source, the rule and the limit, while
// grpc.health.v1 keeps answering as promptly as while the server reads a plain text of the same
// size, and the server's memory stays bounded.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import * as grpcJs from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { protoPath } from 'grpc-health-check';
import { call } from '../../src/cli/client/call.ts';
import { connect, type Clients } from '../../src/cli/client/connection.ts';
import { RemoteCallError } from '../../src/machineconfig/index.ts';
import { spawnServer, type ServerProcess } from '../helpers/server-process.ts';
import { testPki, type TestPki } from '../helpers/test-pki.ts';

const MIB = 1024 * 1024;

let pki: TestPki;
let proc: ServerProcess;
let c: Clients;
before(async () => {
  pki = await testPki();
  proc = await spawnServer(['--data-dir', mkdtempSync(join(tmpdir(), 'mcplane-yaml-bomb-')), '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap']);
  c = connect({ server: proc.address, pkiDir: pki.dir, config: '/dev/null' });
});
after(async () => {
  c?.close();
  proc?.child.kill('SIGKILL');
  await proc?.exited;
});

const header = (name: string) => `apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: ${name}\n  labels: {machineconfiguration.openshift.io/role: worker}\nspec:\n  config: {ignition: {version: 3.4.0}}\n`;
const flowList = (n: number) => `[${Array(n).fill('0').join(',')}]`;
/** The reported shape: one big list, aliased 99 times (just under the library's maxAliasCount of 100). */
const aliasedList = (n: number) => `${header('50-list-bomb')}  extensions: &a ${flowList(n)}\n  kernelArguments: [${Array(99).fill('*a').join(',')}]\n`;
/** Nine levels of ten aliases: 10^9 nodes in under a kilobyte. */
const laughs = () => header('50-laughs') + '  x:\n' + ['    l0: &l0 [x,x,x,x,x,x,x,x,x,x]', ...Array.from({ length: 8 }, (_, i) => `    l${i + 1}: &l${i + 1} [${Array(10).fill(`*l${i}`).join(',')}]`)].join('\n') + '\n';
/** 40,000 aliases over 400 anchors: the library resolves each by scanning all before it (145 s). */
const manyAliases = () => header('50-aliases') + '  x:\n' + Array.from({ length: 400 }, (_, i) => `  - &a${i} x\n  - [${Array(99).fill(`*a${i}`).join(',')}]`).join('\n') + '\n';

/** Polls grpc.health.v1 every 100 ms until stopped; each answer's latency, or the error (its deadline, 60 s, only ends a hung call). */
function pollHealth(): { stop: () => Promise<{ ms: number; status: string }[]> } {
  const health = grpcJs.loadPackageDefinition(loadSync(protoPath, { enums: String })) as any;
  const tls = { ca: readFileSync(`${pki.dir}/ca.crt`), key: readFileSync(`${pki.dir}/admin.key`), cert: readFileSync(`${pki.dir}/admin.crt`) };
  const client = new health.grpc.health.v1.Health(proc.address, grpcJs.credentials.createSsl(tls.ca, tls.key, tls.cert));
  const answers: { ms: number; status: string }[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const start = performance.now();
      const status = await new Promise<string>((resolve) => {
        client.check({ service: '' }, { deadline: Date.now() + 60_000 }, (err: Error | null, res: { status: string }) => resolve(err ? `error: ${err.message}` : res.status));
      });
      answers.push({ ms: performance.now() - start, status });
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    stop: async () => {
      // At least three answers, however fast the refusals were: when the server refused all four
      // within 800 ms, the poll had had time for two, and the count said nothing about the server.
      while (answers.length < 3) await new Promise((r) => setTimeout(r, 20));
      stopped = true;
      await loop;
      client.close();
      return answers;
    },
  };
}

/** Applies `text` and returns the refusal (call's own deadline fails a server that grinds, rather than hanging). */
async function refusal(text: string, source: string, dryRun: boolean): Promise<RemoteCallError> {
  try {
    await call(c, c.config.apply.bind(c.config), { manifests: [{ source, text }], dryRun }, 'apply');
  } catch (err) {
    assert.ok(err instanceof RemoteCallError, String(err));
    return err;
  }
  assert.fail('the Apply was accepted');
}

function peakRssBytes(): number {
  return Number(/^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${proc.child.pid}/status`, 'utf8'))![1]) * 1024;
}

test('alias bombs are refused with INVALID_ARGUMENT, naming source, rule and limit, while health answers as promptly as beside a plain text', async () => {
  const big = aliasedList(1_000_000); // 2 MB, as the dry run that cost an etcd leader its lease
  assert.ok(big.length > 1.9e6 && big.length < 2.1e6, `${big.length} bytes`);
  // The baseline, measured in this run so that it holds on a loaded machine: health answers while
  // the server reads and refuses a plain list of the same size (no aliases) as often.
  const plain = `${header('50-plain-list')}  extensions: ${flowList(1_000_000)}\n`;
  const quiet = pollHealth();
  for (let i = 0; i < 4; i++) await refusal(plain, 'plain-list.yaml', true);
  const baseline = await quiet.stop();
  const poll = pollHealth();
  const refusals: { what: string; err: RemoteCallError; ms: number }[] = [];
  for (const [what, text, dryRun] of [
    ['list aliased 99 times, dry run', big, true],
    ['list aliased 99 times', big, false],
    ['billion laughs', laughs(), false],
    ['40,000 aliases', manyAliases(), true],
  ] as const) {
    const start = performance.now();
    refusals.push({ what, err: await refusal(text, `${what.replace(/[^a-z0-9]+/g, '-')}.yaml`, dryRun), ms: performance.now() - start });
  }
  const answers = await poll.stop();

  for (const { what, err } of refusals) assert.equal(err.grpcCode, grpcJs.status.INVALID_ARGUMENT, `${what}: ${err.message}`);
  const [dry, real, laughed, aliases] = refusals.map((r) => r.err.problems);
  for (const problems of [dry, real]) {
    assert.deepEqual(problems!.map((p) => [p.object, p.rule]), [['document', 'yaml-size']]);
    assert.match(problems![0]!.source!, /^list-aliased-99-times(-dry-run)?\.yaml#0$/);
    assert.match(problems![0]!.message, /^the YAML text has more than 100000 tokens by line 8; one request may hold at most 100000 YAML tokens/);
  }
  assert.deepEqual(laughed!.map((p) => [p.source, p.rule]), [['billion-laughs.yaml#0', 'yaml-expansion']]);
  assert.match(laughed![0]!.message, /more than 100000 YAML nodes with its aliases expanded; alias \*l\d at line \d+, column \d+ alone stands for \d+ nodes/);
  assert.deepEqual(aliases!.map((p) => [p.source, p.rule]), [['40-000-aliases.yaml#0', 'yaml-expansion']]);
  assert.match(aliases![0]!.message, /more than 1000 anchors and aliases/);
  // The CLI's sentence carries it too.
  assert.match(refusals[2]!.err.message, /billion-laughs\.yaml#0: document: : the document has more than 100000 YAML nodes .* \[yaml-expansion\]/);

  assert.ok(answers.length >= 3, `${answers.length} health answers`);
  // A bomb may cost the server what reading its bytes costs, not what expanding it would: a server
  // that stalls on one (the library's alias resolution took 145 s) answers many times slower than
  // beside the plain text. The 250 ms floor keeps a quiet machine's millisecond answers from
  // turning a scheduling hiccup into a failure.
  const worst = (list: { ms: number }[]) => Math.max(...list.map((a) => a.ms));
  const median = (list: { ms: number }[]) => list.map((a) => a.ms).sort((x, y) => x - y)[Math.floor(list.length / 2)]!;
  const limit = Math.max(4 * worst(baseline), 10 * median(baseline), 250);
  const slow = answers.filter((a) => a.status !== 'SERVING' || a.ms >= limit);
  assert.deepEqual(slow, [], `health answers over ${limit.toFixed(0)} ms (baseline: ${baseline.map((a) => `${a.ms.toFixed(0)} ms ${a.status}`).join(', ')}): ${answers.map((a) => `${a.ms.toFixed(0)} ms ${a.status}`).join(', ')}; refusals took ${refusals.map((r) => `${r.what} ${r.ms.toFixed(0)} ms`).join(', ')}`);
  const peak = peakRssBytes();
  assert.ok(peak < 512 * MIB, `server peak RSS ${(peak / MIB).toFixed(0)} MiB`);
});

test('the same request split into many texts is bounded as a whole', async () => {
  // Each text alone holds about 60,000 nodes once expanded, under the limit; together they do not.
  const piece = `${header('50-piece')}  x:\n    a: &a ${flowList(1000)}\n    b: [${Array(60).fill('*a').join(',')}]\n`;
  const manifests = Array.from({ length: 30 }, (_, i) => ({ source: `piece-${i}.yaml`, text: piece.replace('50-piece', `50-piece-${i}`) }));
  const err = await call(c, c.config.apply.bind(c.config), { manifests, dryRun: true }, 'apply').then(() => assert.fail('accepted'), (e: unknown) => e as RemoteCallError);
  assert.equal(err.grpcCode, grpcJs.status.INVALID_ARGUMENT);
  // piece-0 was read (and its unknown field x named); piece-1 broke the budget; the rest were not read.
  assert.deepEqual(err.problems.filter((p) => p.rule.startsWith('yaml-')).map((p) => [p.source, p.rule]), [['piece-1.yaml#0', 'yaml-expansion']]);
  assert.match(err.problems[0]!.message, /together with the manifests before it in this request/);
});

test('a legitimate manifest with anchors and aliases still applies', async () => {
  const mc = (name: string, spec: string) => `- apiVersion: machineconfiguration.openshift.io/v1\n  kind: MachineConfig\n  metadata: {name: ${name}, labels: *labels}\n  spec: ${spec}\n`;
  const text = `apiVersion: v1\nkind: List\nx-labels: &labels {machineconfiguration.openshift.io/role: worker}\nitems:\n${mc('50-anchored', '&spec {kernelArguments: [nosmt, mitigations=auto]}')}${mc('51-anchored', '*spec')}`;
  const res = await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'anchored.yaml', text }], dryRun: false }, 'apply');
  assert.deepEqual(res.objects.map((o) => [o.name, o.action]), [['50-anchored', 'created'], ['51-anchored', 'created']]);
});
