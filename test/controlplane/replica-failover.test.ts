// Three mcplane-server replicas on a real three-member etcd: the leader is killed with SIGKILL
// at five different moments of a rollout with maxUnavailable 1, and the fleet must not notice
// beyond a pause: a new leader within 10 s, agents back on another replica within 5 s, never
// more than one node updating, the rollout completes, and no acknowledged write is lost.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { replicaSetFixture } from '../helpers/server-fixture.ts';
import { eventually, SimulatedAgent } from '../helpers/simulated-agent.ts';

const NODES = 8;
const UPDATE_MS = 2500;

const { pki, etcd, set, agents } = replicaSetFixture({ members: 3, count: 3 });

const kargConfig = (value: string) => ({ source: 'karg.yaml', text: mcYaml('50-karg', 'worker', `  kernelArguments: [${value}]\n`) });
const pool = { source: 'pool.yaml', text: poolYaml('worker', '  maxUnavailable: 1\n') };

async function applyOn(i: number, manifests: { source: string; text: string }[]): Promise<void> {
  const c = set.admin(i);
  await call(c, c.config.apply.bind(c.config), { manifests, dryRun: false }, 'apply');
}

async function workerTarget(i: number): Promise<string> {
  const c = set.admin(i);
  return (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.configuration;
}

test('the leader killed at five moments of a rollout: new leader < 10 s, agents back < 5 s, maxUnavailable held, rollout done, no write lost', async () => {
  await applyOn(0, [pool, kargConfig('a=1')]);
  // Agents spread over the replicas, each knowing the others.
  for (let i = 0; i < NODES; i++) {
    const home = i % 3;
    const name = `node-${i}`;
    const agent = new SimulatedAgent({
      address: set.addresses[home]!, failover: set.addresses.filter((_, j) => j !== home),
      tls: await pki.node(name), name, autoDone: true, doneAfterMs: UPDATE_MS,
      labels: { 'node-role.kubernetes.io/worker': '', 'topology.kubernetes.io/zone': 'z' },
    });
    await agent.connect();
    agents.push(agent);
  }
  const first = await workerTarget(0);
  for (const a of agents) await a.waitFor(() => a.status.currentConfig === first && a.status.state === 'Done', 20_000);

  // Writes acknowledged during the kills must all be there at the end. Their role selects no
  // pool, so they cost no render.
  const acknowledged: string[] = [];
  let writing = true;
  const writer = (async () => {
    for (let n = 0; writing; n++) {
      const i = n % 3;
      if (!set.replicas[i]!.process) continue;
      const name = `90-ack-${n}`;
      try {
        await applyOn(i, [{ source: `${name}.yaml`, text: mcYaml(name, 'nobody', `  kernelArguments: [n=${n}]\n`) }]);
        acknowledged.push(name);
      } catch { /* a replica dying under the call: not acknowledged, so it may be lost */ }
      await new Promise((r) => setTimeout(r, 150));
    }
  })();

  // The invariant, checked from the agents' side: an agent updates from receiving the target
  // until it reports Done; two such intervals must never overlap.
  await applyOn(1, [kargConfig('a=2')]);
  const target = await workerTarget(1);
  assert.notEqual(target, first);

  const moments: [string, () => Promise<void>][] = [
    ['right after the Apply', async () => {}],
    ['while a node is updating', () => eventually(() => agents.some((a) => a.status.desiredConfig === target && a.status.state === 'Working'), 30_000, 'a node updating')],
    ['just after a node reported Done', async () => {
      const done = agents.filter((a) => a.status.currentConfig === target).length;
      await eventually(() => agents.filter((a) => a.status.currentConfig === target).length > done, 30_000, 'another node done');
    }],
    ['at a random time', () => new Promise((r) => setTimeout(r, 300 + Math.random() * 1500))],
    ['just as the next assignment goes out', async () => {
      const assigned = agents.filter((a) => a.lastAssignment?.renderedConfig === target).length;
      await eventually(() => agents.filter((a) => a.lastAssignment?.renderedConfig === target).length > assigned || assigned === NODES, 30_000, 'next assignment');
    }],
  ];
  const failovers: { moment: string; leaderMs: number; agentsMs: number }[] = [];
  for (const [moment, waitForMoment] of moments) {
    await waitForMoment();
    const leader = await set.waitForLeader(15_000);
    const stranded = agents.filter((a) => a.connectedTo === set.addresses[leader]);
    const killedAt = Date.now();
    await set.kill(leader);
    const newLeader = await set.waitForLeader(15_000, leader);
    const leaderMs = Date.now() - killedAt;
    await eventually(() => stranded.every((a) => a.reconnects.some((r) => r.at >= killedAt)), 15_000, 'stranded agents reconnected');
    const agentsMs = Math.max(0, ...stranded.map((a) => a.reconnects.find((r) => r.at >= killedAt)!.at - killedAt));
    failovers.push({ moment, leaderMs, agentsMs });
    assert.ok(leaderMs < 10_000, `${moment}: replica-${newLeader} led ${leaderMs} ms after the kill (limit 10 s)`);
    assert.ok(agentsMs < 5_000, `${moment}: agents of the killed replica were back after ${agentsMs} ms (limit 5 s)`);
    await set.restart(leader);
  }

  // The rollout completes, seen on every replica.
  await eventually(() => agents.every((a) => a.status.currentConfig === target && a.status.state === 'Done'), 90_000, 'every node on the target');
  await eventually(async () => {
    for (let i = 0; i < 3; i++) {
      const c = set.admin(i);
      const p = await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool').catch(() => undefined);
      if (p?.status?.updatedMachineCount !== NODES || p.status.conditions.find((x) => x.type === 'Updated')?.status !== 'True') return false;
    }
    return true;
  }, 30_000, 'pool Updated on every replica');

  const intervals = agents.map((a) => {
    const start = a.assignments.find((x) => x.renderedConfig === target)!.receivedAt;
    return { name: a.options.name, start, end: a.doneAt.get(target)! };
  });
  for (const x of intervals) {
    const overlapping = intervals.filter((y) => y !== x && y.start < x.end && x.start < y.end);
    assert.deepEqual(overlapping.map((y) => y.name), [], `${x.name} updated alongside others with maxUnavailable 1`);
  }

  writing = false;
  await writer;
  const c = set.admin(2);
  const stored = new Set((await call(c, c.config.listMachineConfigs.bind(c.config), {}, 'list')).machineConfigs.map((m) => m.name));
  assert.ok(acknowledged.length > 10, `enough writes during the kills (${acknowledged.length})`);
  assert.deepEqual(acknowledged.filter((n) => !stored.has(n)), [], 'every acknowledged write survives');
  console.log(`failovers: ${JSON.stringify(failovers)}; acknowledged writes: ${acknowledged.length}`);
});

test('one etcd member killed: every replica keeps serving reads and writes', async () => {
  const raftLeader = await etcd.leader();
  await etcd.kill(raftLeader);
  try {
    for (let i = 0; i < 3; i++) {
      await applyOn(i, [{ source: 'm.yaml', text: mcYaml(`91-member-down-${i}`, 'nobody', '  kernelArguments: [m=1]\n') }]);
      const c = set.admin(i);
      const { nodes } = await call(c, c.status.listNodes.bind(c.status), { pool: '', limit: 0, continueToken: '' }, 'list');
      assert.equal(nodes.length, NODES);
    }
    // A leader whose lease renewal met the etcd election may step down (it cannot prove its lease
    // held); a replica leads again within a lease term. Asserted at one instant, this failed
    // beside two CPU hogs, where the election outlasted the renewal's deadline.
    await eventually(async () => (await set.leader()) >= 0, 10_000, 'a replica leading with one etcd member down');
  } finally {
    await etcd.restart(raftLeader);
  }
});
