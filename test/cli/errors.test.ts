// mcctl's error messages through the real interface: a refused operation, connection failures
// of every kind, a bad config file, YAML syntax errors, bounded problem lists and warnings.

import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Metadata, Server, ServerCredentials, status as Status } from '@grpc/grpc-js';
import { stringify } from 'yaml';
import { unselectedConfigs } from '../../src/machineconfig/index.ts';
import { loadMcplaneProto } from '../../src/runtime/proto.ts';
import { mcDoc, parseValid, poolDoc } from '../helpers/manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { spawnServer } from '../helpers/server-process.ts';
import { serverFixture } from '../helpers/server-fixture.ts';

const { server, conn } = serverFixture();
const dir = mkdtempSync(join(tmpdir(), 'mcctl-errors-'));

const mcctl = (...args: string[]) => runCliAsync([...conn, ...args]);
/** What an operator should never have to read. */
const GRPC_INTERNALS = /No connection established|Resolution note|Last error|UNAVAILABLE|grpc|ssl routines|openssl/i;

test('a refused operation says "not allowed" with the server\'s reason, not a credentials problem', async () => {
  const r = await mcctl('delete', 'pool', 'worker');
  assert.equal(r.status, 1);
  assert.equal(r.stderr, 'error: cannot delete MachineConfigPool/worker: not allowed: MachineConfigPool/worker is built in and cannot be deleted (MCO recreates it too); pause it instead\n');
  assert.doesNotMatch(r.stderr, /credentials/);
});

test('connection failures say what was tried and the likely cause, without gRPC internals', async () => {
  const refused = await runCliAsync(['--server', '127.0.0.1:1', '--pki-dir', server.pki.dir, '--config', '/dev/null', '--request-timeout', '3', 'get', 'pools']);
  assert.equal(refused.status, 1);
  assert.equal(refused.stderr, `error: cannot list pools: no connection to 127.0.0.1:1 over TLS (CA ${server.pki.dir}/ca.crt, client certificate ${server.pki.dir}/admin.crt): ` +
    'nothing listens there (connection refused): is mcplane-server running, and on this port?\n');

  const other = await runCliAsync(['pki', 'init', join(dir, 'other')]);
  assert.equal(other.status, 0, other.stderr);
  const wrongCa = await mcctl('--ca', join(dir, 'other', 'ca.crt'), 'get', 'pools');
  assert.equal(wrongCa.status, 1);
  assert.match(wrongCa.stderr, new RegExp(`the server's certificate is not signed by the CA in ${join(dir, 'other', 'ca.crt')}`));
  const foreignCert = await mcctl('--cert', join(dir, 'other', 'admin.crt'), '--key', join(dir, 'other', 'admin.key'), 'get', 'pools');
  assert.equal(foreignCert.status, 1);
  assert.match(foreignCert.stderr, new RegExp(`it most likely rejected the client certificate ${join(dir, 'other', 'admin.crt')}`));

  const plain = await spawnServer(['--data-dir', join(dir, 'plain-data'), '--listen', '127.0.0.1:0', '--insecure', '--no-bootstrap']);
  try {
    const tlsToPlain = await runCliAsync(['--server', plain.address, '--pki-dir', server.pki.dir, '--config', '/dev/null', 'get', 'pools']);
    assert.match(tlsToPlain.stderr, /over TLS .*: the server does not speak TLS there: it may run with --insecure/);
    const plainToTls = await runCliAsync(['--server', server.address, '--insecure', '--config', '/dev/null', 'get', 'pools']);
    assert.match(plainToTls.stderr, new RegExp(`no connection to ${server.address} without TLS \\(--insecure\\): the server closed the connection: it most likely expects TLS`));
    for (const r of [refused, wrongCa, foreignCert, tlsToPlain, plainToTls]) assert.doesNotMatch(r.stderr, GRPC_INTERNALS);
  } finally {
    plain.child.kill('SIGKILL');
  }
});

test('unknown keys in the config file are errors naming the key and the file', async () => {
  const file = join(dir, 'mcctl.yaml');
  writeFileSync(file, `sever: ${server.address}\npkiDir: ${server.pki.dir}\n`);
  const r = await runCliAsync(['--config', file, 'get', 'pools']);
  assert.equal(r.status, 1);
  assert.equal(r.stderr, `error: config file ${file}: unknown key "sever" (did you mean "server"?); known keys: server, statusServer, pkiDir, ca, cert, key, insecure, requestTimeout, timeout, currentContext, contexts\n`);
  writeFileSync(file, `server: ${server.address}\npkiDir: ${server.pki.dir}\n`);
  assert.equal((await runCliAsync(['--config', file, 'get', 'pools', '-o', 'name'])).status, 0);
  writeFileSync(file, `server: ${server.address}\ninsecure: "yes"\n`);
  assert.match((await runCliAsync(['--config', file, 'get', 'pools'])).stderr, /"insecure" must be a boolean, got "yes"/);
});

test('YAML syntax errors show file:line:column and the offending line', async () => {
  const manifest = join(dir, 'bad.yaml');
  writeFileSync(manifest, 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: x\n  labels: a: b\n');
  for (const verb of ['apply', 'validate']) {
    const r = await mcctl(verb, '-f', manifest);
    assert.equal(r.status, 1);
    assert.equal(r.stderr, `error: ${manifest}:5:11: Nested mappings are not allowed in compact mappings\n  5 |   labels: a: b\n    |           ^\n`);
  }
  const config = join(dir, 'broken.yaml');
  writeFileSync(config, 'server: 127.0.0.1:7443\n\tpkiDir: /x\n');
  const r = await runCliAsync(['--config', config, 'get', 'pools']);
  assert.equal(r.status, 1);
  assert.equal(r.stderr, `error: ${config}:2:1: Tabs are not allowed as indentation\n  2 | \tpkiDir: /x\n    | ^\n`);
});

test('a bounded problem list prints every problem received and "and N more"', async () => {
  // A stand-in ConfigService (the real server does not bound its lists yet): it answers Apply as
  // the bounded server will, with the first problems and the full count in trailers.
  const { grpc } = loadMcplaneProto();
  const standIn = new Server();
  standIn.addService(grpc.mcplane.v1.ConfigService.service, {
    Apply(_call: unknown, callback: (err: unknown) => void) {
      const metadata = new Metadata();
      metadata.set('mcplane-error-code', 'MCPLANE_INVALID_DOCUMENT');
      metadata.set('mcplane-problems-bin', Buffer.from(JSON.stringify([
        { source: 'big.yaml#0', object: 'MachineConfig/a', field: 'spec.kernelType', rule: 'kernel-type', message: 'unknown kernelType "turbo"' },
        { source: 'big.yaml#1', object: 'MachineConfig/b', field: 'spec.fips', rule: 'type', message: 'must be a boolean' },
      ])));
      metadata.set('mcplane-problems-total', '7');
      callback({ code: Status.INVALID_ARGUMENT, details: 'invalid document: 7 problems', metadata });
    },
  } as never);
  const port = await new Promise<number>((resolve, reject) => standIn.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  try {
    const r = await runCliAsync(['--server', `127.0.0.1:${port}`, '--insecure', '--config', '/dev/null', 'apply', '-f', 'examples/50-infra.yaml']);
    assert.equal(r.status, 1);
    assert.equal(r.stderr, 'error: invalid document: 7 problems\n' +
      '  - big.yaml#0: MachineConfig/a: spec.kernelType: unknown kernelType "turbo" [kernel-type]\n' +
      '  - big.yaml#1: MachineConfig/b: spec.fips: must be a boolean [type]\n' +
      '  ... and 5 more (7 in all; fix these and apply again to see the rest)\n');
  } finally {
    standIn.forceShutdown();
  }
});

test('a MachineConfig no pool selects is accepted with a Warning on stderr', async () => {
  const r = await runCliAsync([...conn, 'apply', '-f', '-'], { input: stringify(mcDoc('70-typo', 'wroker', { kernelArguments: ['quiet'] })) });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'machineconfig/70-typo created\n');
  assert.match(r.stderr, /^Warning: MachineConfig\/70-typo is selected by no pool, so it reaches no node \(its labels: machineconfiguration\.openshift\.io\/role=wroker; pools select: master \(machineconfiguration\.openshift\.io\/role=master\), worker \(machineconfiguration\.openshift\.io\/role=worker\)\)\n$/);
  // A pool in the same request that selects it: no warning.
  const withPool = await runCliAsync([...conn, 'apply', '-f', '-', '--dry-run'], { input: [
    stringify(mcDoc('70-typo', 'wroker', { kernelArguments: ['quiet'] })),
    stringify(poolDoc('wroker', { machineConfigSelector: { matchLabels: { 'machineconfiguration.openshift.io/role': 'wroker' } }, nodeSelector: { matchLabels: { 'node-role.kubernetes.io/wroker': '' } } })),
  ].join('---\n') });
  assert.equal(withPool.status, 0, withPool.stderr);
  assert.equal(withPool.stderr, '');
});

test('unselectedConfigs: custom pools take worker configs too; only configs no pool selects remain', () => {
  const { configs, pools } = parseValid(
    mcDoc('10-worker', 'worker'), mcDoc('20-infra', 'infra'), mcDoc('30-nobody', 'gpu'),
    poolDoc('worker', { machineConfigSelector: { matchLabels: { 'machineconfiguration.openshift.io/role': 'worker' } } }),
    poolDoc('infra', { machineConfigSelector: { matchExpressions: [{ key: 'machineconfiguration.openshift.io/role', operator: 'In', values: ['worker', 'infra'] }] } }),
  );
  assert.deepEqual(unselectedConfigs(configs, pools).map((c) => c.metadata.name), ['30-nobody']);
  assert.deepEqual(unselectedConfigs(configs, []).map((c) => c.metadata.name), ['10-worker', '20-infra', '30-nobody']);
});
