// Limits on what anyone can send: every one is checked through ConfigService.Apply (or the agent
// stream) over real gRPC/TLS against a real server, and each must end in a clear, whole status.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { Metadata, status as Status, type ServiceError } from '@grpc/grpc-js';
import { call } from '../../src/cli/client/call.ts';
import { connect, type Clients } from '../../src/cli/client/connection.ts';
import { PROBLEMS_TOTAL_TRAILER, PROBLEMS_TRAILER } from '../../src/controlplane/api/status-errors.ts';
import { RemoteCallError, type Problem } from '../../src/machineconfig/index.ts';
import { serverFixture } from '../helpers/server-fixture.ts';
import { spawnServer } from '../helpers/server-process.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { testPki } from '../helpers/test-pki.ts';

const MIB = 1024 * 1024;

const { server, c } = serverFixture();

function mcJson(name: string, files: unknown[], units: unknown[] = []): string {
  return JSON.stringify({
    apiVersion: 'machineconfiguration.openshift.io/v1',
    kind: 'MachineConfig',
    metadata: { name, labels: { 'machineconfiguration.openshift.io/role': 'worker' } },
    spec: { config: { ignition: { version: '3.4.0' }, storage: { files }, systemd: { units } } },
  });
}

const gzFile = (path: string, gz: Buffer) => ({ path, mode: 420, contents: { source: 'data:;base64,' + gz.toString('base64'), compression: 'gzip' } });
const plainFile = (path: string, bytes: number) => ({ path, mode: 420, contents: { source: 'data:;base64,' + Buffer.alloc(bytes, 'a').toString('base64') } });

/** Applies and returns the refusal; fails the test if the Apply was accepted. */
async function refusal(cl: Clients, text: string): Promise<RemoteCallError> {
  try {
    await call(cl, cl.config.apply.bind(cl.config), { manifests: [{ source: 'limits.json', text }], dryRun: false }, 'apply');
  } catch (err) {
    assert.ok(err instanceof RemoteCallError, String(err));
    return err;
  }
  assert.fail('the Apply was accepted');
}

function only(problems: Problem[], rule: string): Problem {
  const matching = problems.filter((p) => p.rule === rule);
  assert.equal(matching.length, 1, JSON.stringify(problems, null, 2));
  return matching[0]!;
}

test('gzip contents that expand past 1.5 MiB are refused at Apply, naming the path, the size and the limit', async () => {
  const err = await refusal(c, mcJson('50-gzip-big', [gzFile('/etc/big.conf', gzipSync(Buffer.alloc(2 * MIB, 'x')))]));
  assert.equal(err.grpcCode, Status.INVALID_ARGUMENT);
  const p = only(err.problems, 'contents-size');
  assert.equal(p.object, 'MachineConfig/50-gzip-big');
  assert.equal(p.field, 'spec.config.storage.files[0].contents.source');
  assert.match(p.message, /^file "\/etc\/big\.conf": /);
  assert.match(p.message, /expand past 1\.5 MiB \(1572864 bytes\)/);
  assert.match(p.message, /limit of 1\.5 MiB \(1572864 bytes\) for one file/);
  // Just under the limit is fine.
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'ok.json', text: mcJson('50-gzip-ok', [gzFile('/etc/ok.conf', gzipSync(Buffer.alloc(MIB, 'x')))]) }], dryRun: true }, 'apply');
});

test('the decoded contents of all files of one MachineConfig are bounded together', async () => {
  const err = await refusal(c, mcJson('50-many', [plainFile('/etc/one', MIB), plainFile('/etc/two', MIB)]));
  assert.equal(err.grpcCode, Status.INVALID_ARGUMENT);
  const p = only(err.problems, 'contents-size');
  assert.equal(p.field, 'spec.config.storage.files[1].contents.source');
  assert.match(p.message, /^file "\/etc\/two": contents are 1 MiB \(1048576 bytes\), above the limit of 1\.5 MiB \(1572864 bytes\) for all files of one MachineConfig/);
});

test('a 4 MB Apply that would expand to gigabytes is refused while the server stays under 1 GiB', async () => {
  // Concatenated gzip members decode as one stream: 46 copies of 64 MiB of zeros, 2.9 GiB in all.
  const member = gzipSync(Buffer.alloc(64 * MIB), { level: 9 });
  const bomb = Buffer.concat(Array.from({ length: 46 }, () => member));
  const text = mcJson('50-bomb', [gzFile('/etc/bomb', bomb)]);
  assert.ok(text.length > 3.9e6 && text.length < 4.2e6, `request is ${text.length} bytes`);

  const pki = await testPki();
  const proc = await spawnServer(['--data-dir', mkdtempSync(join(tmpdir(), 'mcplane-limits-')), '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap']);
  const pc = connect({ server: proc.address, pkiDir: pki.dir, config: '/dev/null' });
  try {
    const err = await refusal(pc, text);
    assert.equal(err.grpcCode, Status.INVALID_ARGUMENT);
    const p = only(err.problems, 'contents-size');
    assert.match(p.message, /^file "\/etc\/bomb": 2\.86 MiB \(\d+ bytes\) of gzip contents expand past 1\.5 MiB/);

    const status = readFileSync(`/proc/${proc.child.pid}/status`, 'utf8');
    const hwmKiB = Number(/^VmHWM:\s+(\d+) kB$/m.exec(status)![1]);
    assert.ok(hwmKiB * 1024 < 1024 * MIB, `server peak RSS ${hwmKiB} KiB`);

    const { pools } = await call(pc, pc.status.listPools.bind(pc.status), {}, 'list');
    assert.ok(pools.length >= 2);
  } finally {
    pc.close();
    proc.child.kill('SIGKILL');
    await proc.exited;
  }
});

test('control characters in paths, unit and dropin names, and spaces in unit names, are refused naming object, field and rule', async () => {
  const paths = ['/etc/a\u0000b', '/etc/a\nb', '/etc/\u001b[2Jx', '/etc/del\u007f', '/etc/tab\there'];
  const units = [
    { name: 'bad\nname.service' },
    { name: 'nul\u0000.service' },
    { name: 'has space.service' },
    { name: 'ok.service', dropins: [{ name: 'x\r.conf', contents: '' }] },
  ];
  // Two applies: a refusal carries only the first problems that fit its trailer budget.
  const errFiles = await refusal(c, mcJson('50-control', paths.map((p) => plainFile(p, 1))));
  const errUnits = await refusal(c, mcJson('50-control', [], units));
  assert.equal(errFiles.grpcCode, Status.INVALID_ARGUMENT);
  assert.equal(errUnits.grpcCode, Status.INVALID_ARGUMENT);
  const err = { problems: [...errFiles.problems, ...errUnits.problems] };
  const got = err.problems.map((p) => `${p.object} ${p.field} ${p.rule}`);
  assert.deepEqual(got, [
    ...paths.map((_, i) => `MachineConfig/50-control spec.config.storage.files[${i}].path control-character`),
    'MachineConfig/50-control spec.config.systemd.units[0].name control-character',
    'MachineConfig/50-control spec.config.systemd.units[1].name control-character',
    'MachineConfig/50-control spec.config.systemd.units[2].name unit-name-characters',
    'MachineConfig/50-control spec.config.systemd.units[3].dropins[0].name control-character',
  ]);
  // The offending text is shown escaped, never raw: a newline in a message would forge a line.
  for (const p of err.problems) assert.doesNotMatch(p.message, /[\u0000-\u001f\u007f]/, p.message);
  assert.match(err.problems[1]!.message, /path "\/etc\/a\\nb" contains the control character U\+000A at offset 6/);
  assert.match(err.problems[7]!.message, /unit name "has space\.service" contains a space/);
});

test("a MachineConfig cannot write the agent's own files, however the path is spelled; units are not affected", async () => {
  const paths = [
    '/etc/mcplane/agent.yaml', '/etc/mcplane/tls/node.key', '/var/lib/mcplane/journal.json', '/etc/mcplane',
    '/etc//mcplane/x', '/etc/./mcplane', '/etc/mcplane/../mcplane/x', '/var/lib/./mcplane/../mcplane/state', '/var/lib',
  ];
  // One path per apply: a refusal carries only the first problems that fit its trailer budget.
  const problems: Problem[] = [];
  for (const path of paths) {
    const err = await refusal(c, mcJson('50-takeover', [plainFile(path, 8)], [{ name: 'mcplane-agent.service', enabled: true }]));
    assert.equal(err.grpcCode, Status.INVALID_ARGUMENT);
    problems.push(...err.problems);
  }
  assert.deepEqual(problems.map((p) => `${p.object} ${p.field} ${p.rule}`),
    paths.map(() => 'MachineConfig/50-takeover spec.config.storage.files[0].path path-agent-owned'));
  assert.match(problems[0]!.message, /path "\/etc\/mcplane\/agent\.yaml" is under \/etc\/mcplane, which belongs to mcplane-agent itself/);
  assert.match(problems[8]!.message, /would replace the directory that holds \/var\/lib\/mcplane/);
  // Neighbours with a shared prefix are not the agent's.
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'ok.json', text: mcJson('50-neighbours', [plainFile('/etc/mcplane-other/x', 8), plainFile('/var/lib/mcplanex', 8)]) }], dryRun: true }, 'apply');
});

test('a problem in a list entry names the entry: the file path for storage.files[3], the unit name for units[2]', async () => {
  const files = [plainFile('/etc/f0', 1), plainFile('/etc/f1', 1), plainFile('/etc/f2', 1),
    { path: '/etc/chrony.conf', mode: 0o4755, contents: { source: 'data:;base64,not base64!' } }];
  const units = [{ name: 'a.service' }, { name: 'b.service' },
    { name: 'chronyd.service', enabled: 'yes', dropins: [{ name: '10-x.conf', contents: 7 }] }];
  const err = await refusal(c, mcJson('50-named', files, units));
  assert.equal(err.grpcCode, Status.INVALID_ARGUMENT);
  assert.deepEqual(err.problems.map((p) => [p.field, p.rule, p.message.split(': ')[0]]), [
    ['spec.config.storage.files[3].mode', 'file-mode-range', 'file "/etc/chrony.conf"'],
    ['spec.config.storage.files[3].contents.source', 'data-url', 'file "/etc/chrony.conf"'],
    ['spec.config.systemd.units[2].enabled', 'type', 'unit "chronyd.service"'],
    ['spec.config.systemd.units[2].dropins[0].contents', 'type', 'unit "chronyd.service"'],
  ]);
  assert.match(err.problems[3]!.message, /^unit "chronyd\.service": dropin "10-x\.conf": must be a string, got number 7$/);
  // The CLI's rendering of the status carries the names too.
  assert.match(err.message, /files\[3\]\.contents\.source: file "\/etc\/chrony\.conf": malformed data URL/);
});

/** Apply without the CLI's interpretation: the raw status, details and trailers as they arrive. */
function rawApply(text: string): Promise<ServiceError> {
  return new Promise((resolve, reject) => {
    const apply = c.config.apply.bind(c.config) as unknown as (req: unknown, md: Metadata, opts: object, cb: (err: ServiceError | null) => void) => void;
    apply({ manifests: [{ source: 'many.json', text }], dryRun: true }, new Metadata(), { deadline: Date.now() + 30_000 }, (err) =>
      err ? resolve(err) : reject(new Error('the Apply was accepted')));
  });
}

function trailerBytes(err: ServiceError): number {
  return Object.entries(err.metadata.toHttp2Headers()).reduce((n, [k, v]) => n + k.length + String(v).length, 0) + encodeURI(err.details).length;
}

test('an Apply with 5,000 problems still gets a whole status: the code, the first problems and the total', async () => {
  const files = Array.from({ length: 5000 }, (_, i) => ({ path: `/etc/many/file-${i}.conf`, mode: 0o4755 }));
  const err = await rawApply(mcJson('50-many-problems', files));
  assert.equal(err.code, Status.INVALID_ARGUMENT);
  const problems = JSON.parse(Buffer.from(err.metadata.get(PROBLEMS_TRAILER)[0] as Buffer).toString('utf8')) as Problem[];
  assert.ok(problems.length >= 5, `only ${problems.length} problems fit`);
  assert.deepEqual(problems.map((p) => p.field), problems.map((_, i) => `spec.config.storage.files[${i}].mode`));
  assert.ok(problems.every((p) => p.rule === 'file-mode-range'));
  assert.equal(err.metadata.get(PROBLEMS_TOTAL_TRAILER)[0], '5000');
  assert.match(err.details, /^invalid document: 5000 problems\n/);
  assert.match(err.details, /… cut here: \d+ more characters in \d+ lines$/);
  assert.ok(trailerBytes(err) < 8 * 1024, `trailers are ${trailerBytes(err)} bytes`);
  // The CLI's path reads the same status into a sentence with the problems that came.
  const viaCli = await refusal(c, mcJson('50-many-problems', files));
  assert.equal(viaCli.problems.length, problems.length);
});

test('one enormous problem is cut, not dropped, and the status stays small', async () => {
  const name = 'x'.repeat(100_000);
  const err = await rawApply(JSON.stringify({ apiVersion: 'v1', kind: 'Secret\ud800', metadata: { name } }));
  assert.equal(err.code, Status.INVALID_ARGUMENT);
  const problems = JSON.parse(Buffer.from(err.metadata.get(PROBLEMS_TRAILER)[0] as Buffer).toString('utf8')) as Problem[];
  assert.ok(problems.length >= 1);
  assert.equal(problems[0]!.rule, 'unknown-kind');
  assert.match(problems[0]!.object, /^Secret\ud800\/x+… \(99608 more characters\)$/);
  // A lone surrogate would make grpc-js's encodeURI throw while sending the status.
  assert.match(err.details, /^invalid document: 1 problem\n  - many\.json#0: Secret\uFFFD\/x+\n… cut here: \d+ more characters$/);
  assert.ok(trailerBytes(err) < 8 * 1024, `trailers are ${trailerBytes(err)} bytes`);
  // Still serving.
  const { pools } = await call(c, c.status.listPools.bind(c.status), {}, 'list');
  assert.ok(pools.length >= 2);
});

test("a node's report is bounded: a 1 MiB reason and 10,000 drift entries come back cut, and ListNodes works", async () => {
  const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('noisy'), name: 'noisy' });
  await agent.connect();
  const drift = Array.from({ length: 10_000 }, (_, i) => ({ path: `/etc/drift/${i}`, kind: 'file', expectedHash: 'a'.repeat(64), actualHash: 'b'.repeat(64), detectedUnixMs: 1_700_000_000_000 + i }));
  const os = { bootedImage: 'i'.repeat(100_000), bootedChecksum: 'c', kernelArguments: Array.from({ length: 5000 }, (_, i) => `k${i}=1`), kernelType: 'default', extensions: [], stagedImage: '', fips: false };
  agent.report({ state: 'Degraded', phase: 'validate', reason: 'r'.repeat(MIB), drift, os });
  const list = async () => (await call(c, c.status.listNodes.bind(c.status), { pool: '', limit: 0, continueToken: '' }, 'list')).nodes.find((n) => n.name === 'noisy');
  await eventually(async () => (await list())?.status?.state === 'Degraded', 10_000, 'the report');
  const node = (await list())!;
  const st = node.status!;
  assert.ok(st.reason.length <= 4096 && st.reason.length > 4000, `reason of ${st.reason.length}`);
  assert.match(st.reason, /^r+ … \[cut: \d+ more characters\]$/);
  assert.equal(Number(/cut: (\d+)/.exec(st.reason)![1]) + st.reason.indexOf(' …'), MIB);
  assert.equal(st.drift.length, 101);
  assert.deepEqual(st.drift.slice(0, 100).map((d) => d.path), drift.slice(0, 100).map((d) => d.path));
  assert.match(st.drift[100]!.path, /^… and 9900 more drifted files and units \(10000 in all/);
  assert.ok(st.os!.bootedImage.length <= 1024 && st.os!.bootedImage.endsWith(' more characters]'));
  assert.equal(st.os!.kernelArguments.length, 257);
  assert.equal(st.os!.kernelArguments[256], '… and 4744 more');
  const got = await call(c, c.status.getNode.bind(c.status), { name: 'noisy' }, 'get');
  assert.equal(got.status!.reason, st.reason);
  agent.close();
});

test("Adopt's reported content is bounded on admission (8 files, 32 KiB each, 64 KiB in all), each cut saying why, and never served in lists", async () => {
  const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('hoarder'), name: 'hoarder' });
  await agent.connect();
  const b64 = (bytes: number, fill: string) => Buffer.alloc(bytes, fill).toString('base64');
  const entry = (i: number, contentBase64: string) => ({ path: `/etc/adopt/${i}.conf`, kind: 'file', expectedHash: 'a'.repeat(64), actualHash: 'b'.repeat(64), detectedUnixMs: 1_700_000_000_000 + i, contentBase64, mode: '0644', user: '0', group: '0' });
  // An agent that ignores the bounds: one 1 MiB file, then 12 of 10 KiB, one not base64.
  const drift = [entry(0, b64(1024 * 1024, 'x')), ...Array.from({ length: 12 }, (_, i) => entry(i + 1, b64(10 * 1024, 'y'))), entry(13, 'not base64!')];
  agent.report({ state: 'Done', phase: 'done', drift, driftPolicy: 'Adopt' });
  await eventually(async () => (await call(c, c.status.getNode.bind(c.status), { name: 'hoarder' }, 'get')).status!.drift.length === 14, 10_000, 'the report');
  const listed = (await call(c, c.status.listNodes.bind(c.status), { pool: '', limit: 0, continueToken: '' }, 'list')).nodes.find((n) => n.name === 'hoarder')!;
  assert.ok(listed.status!.drift.every((d) => d.contentBase64 === ''), 'no content in ListNodes');
  const proposal = await call(c, c.status.getDriftProposal.bind(c.status), { node: 'hoarder' }, 'proposal');
  const files = (JSON.parse(proposal.manifestJson) as { spec: { config: { storage: { files: { path: string; contents: { source: string } }[] } } } }).spec.config.storage.files;
  // 6 files of 10 KiB fit in 64 KiB; the 1 MiB one is past its own bound.
  assert.deepEqual(files.map((f) => f.path), [1, 2, 3, 4, 5, 6].map((i) => `/etc/adopt/${i}.conf`));
  assert.ok(files.every((f) => Buffer.from(f.contents.source.replace('data:;base64,', ''), 'base64').length === 10 * 1024));
  assert.match(proposal.leftOut[0]!, /^file \/etc\/adopt\/0\.conf: content not reported: the file has 1048576 bytes, more than the 32768 a report carries; adopt it by hand$/);
  assert.match(proposal.leftOut[1]!, /^file \/etc\/adopt\/7\.conf: content not reported: the drifted files together pass the 65536 bytes/);
  assert.match(proposal.leftOut.at(-1)!, /^file \/etc\/adopt\/13\.conf: the content reported was not base64$/);
  agent.close();
});

test('a 9 MiB message from a node is refused on its own stream; the server keeps serving', async () => {
  const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node('flood'), name: 'flood' });
  await agent.connect();
  agent.report({ reason: 'z'.repeat(9 * MIB) });
  await agent.waitFor(() => agent.error !== undefined, 10_000);
  assert.equal(agent.error!.code, Status.RESOURCE_EXHAUSTED);
  assert.match(agent.error!.details, /message larger than max/i);
  agent.close();
  // Nothing of it was stored, and everyone else is still served.
  const node = await call(c, c.status.getNode.bind(c.status), { name: 'flood' }, 'get');
  assert.equal(node.status!.reason, '');
  const other = new SimulatedAgent({ address: server.address, tls: await server.pki.node('calm'), name: 'calm' });
  await other.connect();
  assert.equal(other.pool, 'worker');
  other.close();
  const { pools } = await call(c, c.status.listPools.bind(c.status), {}, 'list');
  assert.ok(pools.length >= 2);
});
