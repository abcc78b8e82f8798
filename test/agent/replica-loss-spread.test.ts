// When a replica is lost, its agents spread over the others instead of all moving to the next
// address in their list (which made one survivor take every re-registration: docs/sizing.md).
// Real AgentSessions over real mutual TLS against three stand-in replicas (stand-in-replica.ts).

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { AgentSession } from '../../src/agent/session.ts';
import { createLogger } from '../../src/runtime/logger.ts';
import { readTlsFiles } from '../../src/runtime/tls.ts';
import { eventually } from '../helpers/simulated-agent.ts';
import { StandInReplica } from '../helpers/stand-in-replica.ts';
import { testPki } from '../helpers/test-pki.ts';

const replicas: StandInReplica[] = [];
const sessions: AgentSession[] = [];
after(() => {
  for (const s of sessions) s.stop();
  for (const r of replicas) r.kill();
});

test('the agents of a lost replica re-register on the other two, not all on the next one listed', async () => {
  const pki = await testPki();
  for (const name of ['a', 'b', 'c']) {
    const r = new StandInReplica(name);
    await r.listen(pki);
    replicas.push(r);
  }
  const [a, b, c] = replicas as [StandInReplica, StandInReplica, StandInReplica];
  const servers = replicas.map((r) => `127.0.0.1:${r.port}`);
  const AGENTS = 20;
  for (let i = 0; i < AGENTS; i++) {
    const nodeName = `spread-${i}`;
    const files = await pki.node(nodeName);
    const session = new AgentSession({
      servers, tls: readTlsFiles(files, 'agent TLS'), tlsFiles: files, nodeName, labels: {},
      agentVersion: 'test', heartbeatMs: 1000, bootId: () => 'boot-1', backoff: { initialMs: 50, maxMs: 500 },
      status: { currentConfig: '', desiredConfig: '', state: 'Done', phase: '', reason: '', drift: [], os: null, bootId: 'boot-1', agentVersion: 'test', lastDisruption: '', currentUpdate: null, lastUpdate: null },
      onAssignment: () => {}, onForceReapply: () => {}, log: createLogger({ level: 'silent' }),
    });
    sessions.push(session);
    session.start();
  }
  await eventually(() => a.registrations.length === AGENTS, 10_000, 'every agent on the first address listed');
  assert.equal(b.registrations.length + c.registrations.length, 0, 'the first address is tried first');

  a.kill();
  await eventually(() => b.registrations.length + c.registrations.length === AGENTS, 10_000, 'every agent back');
  // In list order all 20 would be on b. At random, all on one side happens once in 2^19 runs.
  assert.ok(b.registrations.length > 0 && c.registrations.length > 0, `b has ${b.registrations.length}, c has ${c.registrations.length}`);
});
