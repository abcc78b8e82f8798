// MachineConfigNode through a real update: the real server with the Kubernetes API stand-in (a
// Node whose pod sits behind a PodDisruptionBudget, so the drain waits where the test can look),
// a real agent on a sandboxed host (real systemd user manager, the rpm-ostree and reboot
// stand-ins; the test performs the reboot when it has looked). At each stop `mcctl get mcn -o
// yaml` shows the conditions MCO sets at that step, and their lastTransitionTime is the time
// mcplane recorded for the step (the node's update history, read through GetNodeHistory); each object is
// also checked field by field against MCO's Go types (test/helpers/mco-machine-config-node-fields.ts).

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { call } from '../../src/cli/client/call.ts';
import { untilNode } from '../helpers/converge.ts';
import { startKubeRealAgentBed } from '../helpers/kube-real-agent-bed.ts';
import { assertMcoMachineConfigNodeShape } from '../helpers/mco-machine-config-node-fields.ts';
import { type KubeObjectLike } from '../helpers/kube-workloads.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { runCliAsync } from '../helpers/run-cli.ts';
import { eventually } from '../helpers/simulated-agent.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';

interface Cond { type: string; status: string; reason: string; message: string; lastTransitionTime: string }

/** A Unix ms time as MCO writes it (RFC 3339, whole seconds). */
const rfc3339 = (ms: number | string): string => new Date(Number(ms)).toISOString().replace(/\.\d+Z$/, 'Z');

test('a real agent, a drain and a reboot: the MachineConfigNode conditions at each step, with the recorded times', { skip }, async () => {
  const { standIn, server, host, close } = await startKubeRealAgentBed({
    tmpPrefix: 'mcn-real-',
    pods: [{ namespace: 'shop', name: 'web', labels: { app: 'web' } }],
    // Allows no disruption: the drain waits until the test removes it.
    objects: [{ apiVersion: 'policy/v1', kind: 'PodDisruptionBudget', metadata: { name: 'web-pdb', namespace: 'shop' }, spec: { maxUnavailable: 0, selector: { matchLabels: { app: 'web' } } } } as never],
    drain: { retryBaseMs: 100, retryMaxMs: 300, pollMs: 50 },
  });
  const conn = ['--server', server.address, '--pki-dir', server.pki.dir, '--config', '/dev/null'];
  const mcn = async (): Promise<{ spec: { configVersion: { desired: string } }; status: { configVersion: { current: string; desired: string }; conditions: Cond[] } }> => {
    const r = await runCliAsync([...conn, 'get', 'mcn', 'host-a', '-o', 'yaml']);
    assert.equal(r.status, 0, r.stderr);
    const o = parseYaml(r.stdout);
    // At every stop of the update, the drain and the reboot: MCO's types, field by field.
    assertMcoMachineConfigNodeShape(o);
    return o;
  };
  const cond = (o: Awaited<ReturnType<typeof mcn>>, type: string): Cond => o.status.conditions.find((c) => c.type === type)!;
  try {
    const c = server.admin();
    await call(c, c.config.apply.bind(c.config), { manifests: [
      { source: 'pool.yaml', text: poolYaml('worker') },
      { source: 'chrony.yaml', text: mcYaml('50-chrony', 'worker', '  config:\n    ignition: {version: 3.4.0}\n    storage:\n      files:\n      - {path: /etc/chrony.conf, mode: 0644, contents: {source: "data:,server%20ntp1"}}\n') },
    ], dryRun: false }, 'apply');
    const target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get pool')).status!.configuration;
    await host.start();

    // 1. The drain, held by the budget: cordoned, draining, not updated.
    // Until the host has registered, it has no MachineConfigNode (NOT_FOUND).
    const has = async (type: string, status: string): Promise<boolean> => {
      try {
        return (await call(c, c.status.getMachineConfigNode.bind(c.status), { name: 'host-a' }, 'mcn')).status?.conditions.some((x) => x.type === type && x.status === status) === true;
      } catch {
        return false;
      }
    };
    await eventually(() => has('Drained', 'Unknown'), 30_000, 'Drained Unknown');
    const draining = await mcn();
    assert.equal(draining.spec.configVersion.desired, target);
    assert.deepEqual({ ...cond(draining, 'Cordoned'), lastTransitionTime: '' }, { type: 'Cordoned', status: 'True', reason: 'UpdateExecutedCordoned', message: 'Cordoned node. The node is reporting Unschedulable = true', lastTransitionTime: '' });
    assert.equal(cond(draining, 'Drained').reason, 'UpdateExecutedDrained');
    assert.match(cond(draining, 'Drained').message, /^Draining node\. .*PodDisruptionBudget shop\/web-pdb/);
    assert.deepEqual([cond(draining, 'UpdateExecuted').status, cond(draining, 'UpdateExecuted').reason], ['Unknown', 'Drained']);
    assert.deepEqual([cond(draining, 'Updated').status, cond(draining, 'Updated').message], ['False', 'Node host-a needs an update']);
    assert.equal(cond(draining, 'Updated').lastTransitionTime, cond(draining, 'Cordoned').lastTransitionTime, 'the update starts with the drain');
    // Read again while nothing changed: the same times (none comes from the clock).
    assert.deepEqual((await mcn()).status.conditions.filter((x) => x.type !== 'Drained'), draining.status.conditions.filter((x) => x.type !== 'Drained'));

    // 2. The budget goes: drained, then the agent prepares, applies and asks for a reboot, which
    // the test holds (it performs reboots only in untilNode).
    standIn.remove('PodDisruptionBudget', 'web-pdb', 'shop');
    await eventually(async () => {
      const n = await call(c, c.status.getNode.bind(c.status), { name: 'host-a' }, 'node');
      return n.status?.phase === 'reboot' && host.reboots === 0 && existsSync(host.rebootMarker);
    }, 60_000, 'the agent waiting for its reboot');
    const rebooting = await mcn();
    assert.deepEqual([cond(rebooting, 'Drained').status, cond(rebooting, 'Drained').message], ['True', `Drained node. The drain for ${target} is complete`]);
    assert.equal(cond(rebooting, 'UpdatePrepared').message, 'Update Compatible. Post Cfg Actions: [reboot] Drain Required: true');
    assert.deepEqual([cond(rebooting, 'AppliedFilesAndOS').status, cond(rebooting, 'UpdateExecuted').status], ['True', 'True']);
    assert.deepEqual({ ...cond(rebooting, 'RebootedNode'), lastTransitionTime: '' }, { type: 'RebootedNode', status: 'Unknown', reason: 'RebootedNode', message: 'Upgrade requires a reboot.', lastTransitionTime: '' });
    assert.equal(cond(rebooting, 'Updated').status, 'False');

    // 3. The reboot, the Done report, the uncordon: Updated, everything else reset as MCO does.
    await untilNode(c, [host], 'host-a', (n) => n.status!.currentConfig === target && n.status!.state === 'Done', 60_000);
    await eventually(() => (standIn.get('Node', 'host-a') as unknown as KubeObjectLike).spec?.unschedulable !== true, 10_000, 'uncordoned');
    await eventually(() => has('Updated', 'True'), 10_000, 'Updated True');
    const done = await mcn();
    assert.deepEqual(done.status.configVersion, { current: target, desired: target });

    // Every time is the one on record: the node's history has the drain and each agent phase.
    const history = await call(c, c.status.getNodeHistory.bind(c.status), { name: 'host-a' }, 'history');
    const update = history.updates.find((u) => u.toConfig === target)!;
    const phase = (name: string) => update.phases.find((p) => p.name === name)!;
    assert.equal(cond(draining, 'Cordoned').lastTransitionTime, rfc3339(phase('drain').startedUnixMs), 'cordoned when the drain started');
    assert.equal(cond(rebooting, 'Drained').lastTransitionTime, rfc3339(phase('drain').endedUnixMs), 'drained when the drain ended');
    assert.equal(cond(rebooting, 'UpdatePrepared').lastTransitionTime, rfc3339(phase('plan').endedUnixMs), 'prepared when the plan was made');
    assert.equal(cond(rebooting, 'AppliedFilesAndOS').lastTransitionTime, rfc3339(update.phases.findLast((p) => p.name === 'apply')!.endedUnixMs), 'applied when apply ended');
    assert.equal(cond(rebooting, 'RebootedNode').lastTransitionTime, rfc3339(phase('reboot').startedUnixMs), 'the reboot asked for when its phase started');
    const end = rfc3339(update.endedUnixMs);
    assert.deepEqual(cond(done, 'Updated'), { type: 'Updated', status: 'True', reason: 'Updated', message: 'Node host-a Updated', lastTransitionTime: end });
    assert.deepEqual(cond(done, 'NodeDegraded'), { type: 'NodeDegraded', status: 'False', reason: 'NodeDegraded', message: 'Node host-a upgrade succeeded', lastTransitionTime: end });
    for (const [type, message] of [
      ['RebootedNode', 'Node has rebooted'],
      ['Cordoned', 'Cordoned node. The node is reporting Unschedulable = true'],
      ['Drained', `Drained node. The drain for ${target} is complete`],
      ['Uncordoned', 'UnCordoned node. The node is reporting Unschedulable = false'],
      ['Resumed', `In desired config ${target}. Resumed normal operations.`],
    ] as const) {
      assert.deepEqual([cond(done, type).status, cond(done, type).message, cond(done, type).lastTransitionTime], ['False', `Action during update to ${target}: ${message}`, end], type);
    }
    const oc = await runCliAsync([...conn, 'get', 'mcn']);
    assert.match(oc.stdout.split('\n')[1]!, new RegExp(`^host-a\\s+worker\\s+${target}\\s+${target}\\s+True\\s+`));
  } finally {
    await close();
  }
});
