// The store survives restarts and kill -9; SIGTERM shuts down cleanly.

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { connect } from '../../src/cli/client/connection.ts';
import { freshStore, spawnServer } from '../helpers/server-process.ts';
import { SimulatedAgent } from '../helpers/simulated-agent.ts';
import { testPki } from '../helpers/test-pki.ts';
import { scaled } from '../helpers/time-scale.ts';
import { startTestServer } from '../helpers/test-server.ts';

const mc = (name: string, karg: string) => ({
  source: `${name}.yaml`,
  text: `apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: ${name}, labels: {machineconfiguration.openshift.io/role: worker}}\nspec: {kernelArguments: [${karg}]}\n`,
});

test('a restart keeps configs, pools, rendered configs and nodes', async () => {
  const first = await startTestServer();
  let c = first.admin();
  await call(c, c.config.apply.bind(c.config), { manifests: [mc('10-a', 'a=1')], dryRun: false }, 'apply');
  await call(c, c.config.setPoolPaused.bind(c.config), { name: 'master', paused: true }, 'pause');
  const agent = new SimulatedAgent({ address: first.address, tls: await first.pki.node('keeper'), name: 'keeper', autoDone: true });
  await agent.connect();
  await agent.waitFor(() => agent.assignments.length === 1);
  await new Promise((r) => setTimeout(r, 200)); // let the Done report reach the store
  const before = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
  agent.close();
  await first.close();

  const second = await startTestServer({ dataDir: first.dataDir });
  c = second.admin();
  const after = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get');
  assert.equal(after.status!.configuration, before.status!.configuration);
  assert.equal((await call(c, c.config.getMachineConfig.bind(c.config), { name: '10-a' }, 'get')).name, '10-a');
  assert.equal((await call(c, c.status.getPool.bind(c.status), { name: 'master' }, 'get')).paused, true);
  const node = await call(c, c.status.getNode.bind(c.status), { name: 'keeper' }, 'get');
  assert.equal(node.status!.currentConfig, before.status!.configuration);
  assert.equal(node.status!.connected, false, 'nobody is connected right after a restart');
  await call(c, c.config.getRenderedConfig.bind(c.config), { name: before.status!.configuration }, 'get');
  await second.close();
});

test('kill -9 during a burst of Apply calls loses no acknowledged write', async () => {
  const { start } = await freshStore('mcplane-kill-');
  const { server, c } = await start();
  const acked: string[] = [];
  let killed = false;
  // Four concurrent writers; kill the server once 40 writes are acknowledged.
  await Promise.all([0, 1, 2, 3].map(async (w) => {
    for (let i = 0; !killed; i++) {
      const name = `burst-${w}-${i}`;
      try {
        await call(c, c.config.apply.bind(c.config), { manifests: [mc(name, `n=${i}`)], dryRun: false }, 'apply');
        acked.push(name);
        if (acked.length >= 40 && !killed) {
          killed = true;
          server.child.kill('SIGKILL');
        }
      } catch {
        return; // the server is gone: this write was never acknowledged
      }
    }
  }));
  await server.exited;
  c.close();

  const { server: again, c: c2 } = await start();
  const { machineConfigs } = await call(c2, c2.config.listMachineConfigs.bind(c2.config), {}, 'list');
  const stored = new Set(machineConfigs.map((m) => m.name));
  assert.deepEqual(acked.filter((n) => !stored.has(n)), []);
  assert.ok(acked.length >= 40);
  c2.close();
  again.child.kill('SIGTERM');
  assert.equal(await again.exited, 0);
});

test('SIGTERM: health goes NOT_SERVING, agents are let go, the process exits 0', async () => {
  const pki = await testPki();
  const server = await spawnServer(['--data-dir', mkdtempSync(join(tmpdir(), 'mcplane-term-')), '--listen', '127.0.0.1:0', '--pki-dir', pki.dir, '--no-bootstrap']);
  const agent = new SimulatedAgent({ address: server.address, tls: await pki.node('term-node'), name: 'term-node' });
  await agent.connect();
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0);
  await agent.waitFor(() => agent.ended, 5000);
  assert.ok(server.logs.some((l) => l.includes('"msg":"stopped"')), 'logs a clean stop');
  for (const line of server.logs) assert.match(line, /^<[2-7]>\{/, 'every log line has a syslog priority prefix');
  agent.close();
});

test('SIGTERM with idle clients and an open Watch: exit 0 within 2 s, the Watch ends saying the server is shutting down', async () => {
  const { pki, start } = await freshStore('mcplane-term-');
  const { server, c } = await start();
  await call(c, c.status.listPools.bind(c.status), {}, 'list pools'); // an idle, connected client
  const agent = new SimulatedAgent({ address: server.address, tls: await pki.node('idle-node'), name: 'idle-node' });
  await agent.connect();
  const watch = c.status.watch({ pools: true, nodes: true });
  const ended = new Promise<{ code: number; details: string }>((resolve) => {
    watch.on('error', (err: { code: number; details: string }) => resolve(err));
    watch.on('data', () => {});
  });
  await new Promise((r) => setTimeout(r, 300));
  const t0 = Date.now();
  server.child.kill('SIGTERM');
  assert.equal(await server.exited, 0);
  const took = Date.now() - t0;
  // 2 s on a quiet machine: the shutdown is CPU work a busy machine slows down.
  assert.ok(took < scaled(2000), `exited ${took} ms after SIGTERM (budget ${scaled(2000)} ms)`);
  const status = await ended;
  assert.equal(status.code, 14, 'UNAVAILABLE: reconnect');
  assert.match(status.details, /server is shutting down/);
  agent.close();
  c.close();
});
