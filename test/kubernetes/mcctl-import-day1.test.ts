// MCO's day-1 constructs, storage.directories and storage.links: a real cluster's install-time
// configs carry them, so `mcctl import` takes them (they were refused before), the render keeps
// them, and a new host's first-boot Ignition (the bootstrap endpoint) carries them, in Ignition 3
// and in 2.2. A later change follows MCO's rule, which the agent applies (test/agent/day1-storage).

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startKubeApiStandIn, type KubeApiStandIn } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { call } from '../../src/cli/client/call.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';
import { openshiftClusterObjects } from './openshift-cluster-objects.ts';

let standIn: KubeApiStandIn;
let server: TestServer;
let kubeconfig: string;

const DAY1 = {
  apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfig',
  metadata: { name: '98-worker-day1', labels: { 'machineconfiguration.openshift.io/role': 'worker' } },
  spec: {
    config: {
      ignition: { version: '3.2.0' },
      storage: {
        directories: [{ path: '/var/lib/examplecorp', mode: 493, user: { name: 'core' } }],
        links: [{ path: '/etc/examplecorp/current', target: '/var/lib/examplecorp/v1', hard: false }],
      },
    },
  },
};

before(async () => {
  standIn = await startKubeApiStandIn();
  for (const o of [...openshiftClusterObjects(), DAY1]) standIn.add(o);
  kubeconfig = standIn.writeKubeconfig(mkdtempSync(join(tmpdir(), 'mcctl-import-day1-')));
  server = await startTestServer({ bootstrap: true });
});
after(async () => {
  await server?.close();
  await standIn?.close();
});

function ignition(accept?: string): Promise<any> {
  const ca = readFileSync(join(server.pki.dir, 'ca.crt'));
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { authorization: 'Bearer test-bootstrap-token', ...(accept ? { accept } : {}) };
    const req = request({ host: '127.0.0.1', port: server.handle.bootstrapPort, path: '/config/worker', ca, servername: 'localhost', headers }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(text)) : reject(new Error(`${res.statusCode}: ${text}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

test('mcctl import takes a config with storage.directories and storage.links; the render and the first-boot Ignition keep them', async () => {
  const r = await runCliAsync(['import', '--kubeconfig', kubeconfig], { env: { MCPLANE_SERVER: server.address, MCPLANE_PKI_DIR: server.pki.dir } });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^machineconfig\/98-worker-day1 created$/m);

  // The render runs after the import returns.
  const c = server.admin();
  let rendered: any;
  await eventually(async () => {
    const target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status?.configuration ?? '';
    rendered = target ? server.handle.controlPlane.cache.renderedConfig(target) : undefined;
    return rendered !== undefined && JSON.stringify(rendered).includes('examplecorp');
  }, 10_000, 'the worker pool rendered with the day-1 config');

  const v3 = await ignition();
  assert.deepEqual(v3.storage.directories, [{ mode: 493, path: '/var/lib/examplecorp', user: { name: 'core' } }]);
  assert.deepEqual(v3.storage.links, [{ hard: false, path: '/etc/examplecorp/current', target: '/var/lib/examplecorp/v1' }]);
  assert.ok(v3.storage.files.some((f: any) => f.path === '/etc/chrony.conf'), 'the files are there too');

  const v2 = await ignition('application/vnd.coreos.ignition+json; version=2.2.0');
  assert.equal(v2.ignition.version, '2.2.0');
  assert.deepEqual(v2.storage.directories, [{ filesystem: 'root', mode: 493, path: '/var/lib/examplecorp', user: { name: 'core' } }]);
  assert.deepEqual(v2.storage.links, [{ filesystem: 'root', hard: false, path: '/etc/examplecorp/current', target: '/var/lib/examplecorp/v1' }]);
});

test('a link or directory with a bad path is refused at apply, naming the entry', async () => {
  const bad = { ...DAY1, metadata: { ...DAY1.metadata, name: '97-bad' }, spec: { config: { ignition: { version: '3.2.0' }, storage: { links: [{ path: 'relative/link', target: '/x' }, { path: '/etc/nolink' }] } } } };
  const { writeFileSync } = await import('node:fs');
  const file = join(mkdtempSync(join(tmpdir(), 'day1-bad-')), 'bad.yaml');
  writeFileSync(file, JSON.stringify(bad));
  const r = await runCliAsync(['apply', '-f', file], { env: { MCPLANE_SERVER: server.address, MCPLANE_PKI_DIR: server.pki.dir } });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /storage\.links\[0\]\.path.*relative/);
  assert.match(r.stderr, /storage\.links\[1\]\.target.*a link needs a target/);
});
