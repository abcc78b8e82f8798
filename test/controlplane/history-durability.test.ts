// A node's update history survives kill -9 of the server: the agent reports a finished update
// over real gRPC/mTLS, the server (a separate process on a SQLite file) is killed, started
// again on the same file, and serves the record.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { freshStore } from '../helpers/server-process.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';
import { silenceIpServernameWarning } from '../../src/runtime/process-warnings.ts';

silenceIpServernameWarning();

test('kill -9 after an update finished: the restarted server on the same store serves the node\'s history', async () => {
  const { pki, start } = await freshStore('mcplane-history-kill-');
  let { server, c } = await start();
  const agent = new SimulatedAgent({ address: server.address, tls: await pki.node('keeper'), name: 'keeper' });
  try {
    await agent.connect();
    await agent.waitFor(() => agent.assignments.length === 1);
    const to = agent.lastAssignment!.renderedConfig;
    const record = {
      id: 'u-1', fromConfig: '', toConfig: to, startedUnixMs: 1000, endedUnixMs: 5000, disruption: 'reboot: kernelArguments changed', result: 'Done', reason: '',
      // What started it: '' for an update from an assignment (a drift rewrite names its drift).
      cause: '',
      // The lifecycle hooks the update ran (none here).
      hooks: [],
      phases: [{ name: 'apply', startedUnixMs: 1000, endedUnixMs: 2000, source: 'agent' }, { name: 'reboot', startedUnixMs: 2000, endedUnixMs: 4000, source: 'agent' }, { name: 'validate', startedUnixMs: 4000, endedUnixMs: 5000, source: 'agent' }],
    };
    agent.report({ currentConfig: to, desiredConfig: to, state: 'Done', phase: 'done', lastUpdate: record });
    const history = async () => (await call(c, c.status.getNodeHistory.bind(c.status), { name: 'keeper' }, 'history')).updates;
    await eventually(async () => (await history()).length === 1, 10_000, 'the update stored');
    // Re-sent reports of the same update (every status report carries it) store nothing new.
    agent.report({ reason: 'again' });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await history()).length, 1);

    server.child.kill('SIGKILL');
    await server.exited;
    c.close();
    ({ server, c } = await start());
    const kept = await history();
    assert.equal(kept.length, 1);
    assert.deepEqual({ ...kept[0], phases: kept[0]!.phases.map((p) => ({ ...p })) }, record);
  } finally {
    agent.close();
    c.close();
    server.child.kill('SIGKILL');
    await server.exited;
  }
});
