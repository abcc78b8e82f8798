// A store written by an older version, opened by today's server: what a rolling upgrade does to
// the replica that restarts on the new version first (and what every replica does after it). For
// every recorded protocol fixture, its store.db (the recording server's store at the end of its
// update flow, in `mcplane-server backup`'s format) is put in a new data directory, as
// `mcplane-server restore` or an upgrade in place leaves it; today's server must open it (the SQLite
// store adds what its schema lacks), serve every object the recording server served from it
// (store.json), and take a new change on it.

import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { demoServiceConfig } from '../helpers/manifests.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { startTestServer } from '../helpers/test-server.ts';
import { protocolFixtures } from './protocol-fixtures.ts';

// The fixture is a SQLite file; on etcd an upgrade keeps the keys, which etcd's own snapshot covers.
const skip = process.env.MCPLANE_TEST_STORE === 'etcd' && 'the recorded store is a SQLite file';

interface RecordedStore {
  pools: { name: string; configuration: string; machineCount: number; updatedMachineCount: number }[];
  machineConfigs: string[];
  renderedConfigs: string[];
  nodes: { name: string; pool: string; currentConfig: string; desiredConfig: string; state: string; agentVersion: string }[];
}

for (const f of protocolFixtures().filter((x) => existsSync(join(x.dir, 'store.db')))) {
  test(`today's server opens the store ${f.version} left and serves every object in it`, { skip }, async () => {
    const want = JSON.parse(readFileSync(join(f.dir, 'store.json'), 'utf8')) as RecordedStore;
    const dataDir = mkdtempSync(join(tmpdir(), `mcplane-store-${f.version}-`));
    // A copy: the server migrates the file it opens, and the fixture must stay as recorded.
    copyFileSync(join(f.dir, 'store.db'), join(dataDir, 'mcplane.db'));
    const server = await startTestServer({ dataDir });
    try {
      const c = server.admin();
      const pools = (await call(c, c.status.listPools.bind(c.status), {}, 'list pools')).pools;
      assert.deepEqual(pools.map((p) => ({ name: p.name, configuration: p.status?.configuration, machineCount: p.status?.machineCount, updatedMachineCount: p.status?.updatedMachineCount })), want.pools);
      const configs = (await call(c, c.config.listMachineConfigs.bind(c.config), {}, 'list configs')).machineConfigs;
      assert.deepEqual(configs.map((m) => m.name), want.machineConfigs);
      const rendered = (await call(c, c.config.listRenderedConfigs.bind(c.config), {}, 'list rendered')).renderedConfigs;
      assert.deepEqual(rendered.map((r) => r.name).sort(), [...want.renderedConfigs].sort());
      for (const r of rendered) {
        const full = await call(c, c.config.getRenderedConfig.bind(c.config), { name: r.name }, 'get rendered');
        assert.equal(typeof JSON.parse(full.specJson).config, 'object', r.name);
      }
      const nodes = (await call(c, c.status.listNodes.bind(c.status), {}, 'list nodes')).nodes;
      assert.deepEqual(nodes.map((n) => ({ name: n.name, pool: n.pool, currentConfig: n.status!.currentConfig, desiredConfig: n.status!.desiredConfig, state: n.status!.state, agentVersion: n.status!.agentVersion })), want.nodes);
      // The agent's session belonged to the recording process: dropped, as after any restart.
      assert.ok(nodes.every((n) => !n.status!.connected));
      for (const n of want.nodes) {
        const history = await call(c, c.status.getNodeHistory.bind(c.status), { name: n.name }, 'history');
        assert.ok(history.updates.some((u) => u.toConfig === n.currentConfig && u.result === 'Done'), `${n.name}'s history: ${JSON.stringify(history.updates.map((u) => [u.toConfig, u.result]))}`);
      }
      // Events expire an hour after they last happened (EVENT_TTL_MS, as Kubernetes Events do),
      // so the recorded ones are gone in most runs: the list must answer, with well-formed events.
      const events = (await call(c, c.status.listEvents.bind(c.status), {}, 'events')).events;
      assert.ok(events.every((e) => e.reason && e.type), JSON.stringify(events));

      // And it writes to it: a changed config renders a new target for the pool.
      const before = want.pools.find((p) => p.name === 'worker')!.configuration;
      await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'after-upgrade.yaml', text: demoServiceConfig('written after the upgrade', { name: '60-after-upgrade' }) }], dryRun: false }, 'apply');
      await eventually(async () => (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.configuration !== before, 10_000, 'a new rendered config for worker');
    } finally {
      await server.close();
    }
  });
}
