// kill -9 while a node rolls back from a failed health gate: the journal's steps (rolling-back)
// let the restarted agent finish the way back, so the node ends on its previous files, reports
// RolledBack with the cause, and leaves no temp or undo file behind.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from '../helpers/converge.ts';
import { poolYaml } from '../helpers/manifests.ts';
import { sandboxFixture } from '../helpers/sandbox-fixture.ts';

// Healthy while /etc/gate/state says ok (the sandbox's root is in the agent's environment).
const pool = poolYaml('worker', `  maxUnavailable: 100%
  disruptionPolicy: {files: [{path: /etc/gate/, actions: [{type: none}]}]}
  healthCheck: {command: ["/bin/sh", "-c", "grep -qx ok \\"$MCPLANE_TEST_ROOT/etc/gate/state\\" || { echo \\"state is $(cat \\"$MCPLANE_TEST_ROOT/etc/gate/state\\")\\"; exit 2; }"], timeout: 1s}
`);
const config = (state: string, extra: string) => `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 50-gate, labels: {machineconfiguration.openshift.io/role: worker}}
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
        - {path: /etc/gate/state, contents: {source: "data:,${state}"}}
        - {path: /etc/gate/${extra}, contents: {source: "data:,${extra}"}}
`;

const { skip, server, c, systemd, hosts } = sandboxFixture({ sharedSystemd: true, manifests: [pool] });

for (const [n, point] of ['rolling-back', 'rollback-files'].entries()) {
  test(`kill -9 at ${point}: the restarted agent finishes the rollback and reports RolledBack`, { skip }, async () => {
    const name = `gate-${n}`;
    const host = new SandboxHost({ name, server: server.address, pki: server.pki, systemd });
    hosts.push(host);
    await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'a', text: config('ok', 'only-a') }], dryRun: false }, 'apply');
    const a = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
    await host.start({ MCPLANE_TEST_ROOT: host.root });
    await untilNode(c, [host], name, (x) => x.status!.currentConfig === a && x.status!.state === 'Done');
    await host.kill();

    await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'b', text: config('broken', 'only-b') }], dryRun: false }, 'apply');
    const b = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
    host.spawnAgent({ MCPLANE_TEST_ROOT: host.root, MCPLANE_FAILPOINT: point });
    assert.equal(await host.exited(), -1, `the failpoint ${point} killed the agent`);
    const journal = JSON.parse(readFileSync(join(host.stateDir, 'journal.json'), 'utf8'));
    assert.equal(journal.pending.step, 'rolling-back');
    assert.match(journal.pending.rollbackCause, /exited 2: state is broken/);

    host.spawnAgent({ MCPLANE_TEST_ROOT: host.root });
    const node = await untilNode(c, [host], name, (x) => x.status!.state === 'RolledBack');
    assert.equal(node.status!.currentConfig, a);
    assert.match(node.status!.reason, new RegExp(`^health: command /bin/sh -c .* exited 2: state is broken \\(after 1s, the health check's timeout\\); rolled back to ${a}; \`mcctl node reapply\` retries ${b}`));
    assert.equal(host.file('etc/gate/state'), 'ok');
    assert.equal(host.file('etc/gate/only-a'), 'only-a');
    assert.equal(host.file('etc/gate/only-b'), undefined);
    assert.deepEqual(readdirSync(join(host.root, 'etc/gate')).filter((f) => f.includes('.mcplane-')), [], 'no temp or undo file is left behind');
  });
}
