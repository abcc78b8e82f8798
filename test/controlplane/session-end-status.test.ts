// When an agent's stream ends, the control plane stamps "last seen" on the node's status. It
// must stamp the agent's latest report, not an older one the cache still held while the
// report's batch was being written (the race the close path used to lose).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { NodeStatus } from '../../src/machineconfig/index.ts';
import type { AgentStream } from '../../src/controlplane/sessions/agent-sessions.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

let server: TestServer;
before(async () => { server = await startTestServer(); });
after(() => server.close());

const status = (state: NodeStatus['state'], phase: string): NodeStatus => ({
  currentConfig: '', desiredConfig: '', state, phase, reason: '', drift: [], os: null, bootId: 'b1', agentVersion: 'test', lastDisruption: '',
});

test('the status written when a stream ends is the last report, even one the cache has not seen yet', async () => {
  const cp = server.handle.controlPlane;
  // The stream is a sink: the control plane writes assignments to it and ends it.
  const stream: AgentStream = { write: () => true, end: () => undefined };
  for (let round = 0; round < 20; round++) {
    const node = `n-${round}`;
    await cp.agents.registerNode({ nodeName: node, labels: { 'node-role.kubernetes.io/worker': '' }, bootId: 'b1', agentVersion: 'test', status: status('Working', 'check') }, stream);
    cp.agents.reportStatus(node, status('Degraded', `apply-${round}`));
    await cp.agents.disconnect(node, stream);
    const stored = await cp.store.get('NodeStatus', node);
    assert.equal((stored?.value as { status: NodeStatus }).status.phase, `apply-${round}`, `round ${round}: the last report survives the stream's end`);
  }
});
