// `mcplane-agent --root DIR`: the config and every path it names are the host's, found under DIR
// (like rpm --root). The agent runs on a sandboxed root whose config names its own state
// directory, unit directory, SSH key directory, boot id file and TLS files as host paths; all of
// them must be used under DIR, and nothing may appear at those paths on the machine itself.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { stringify } from 'yaml';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { untilNode } from '../helpers/converge.ts';
import { canRunUserSystemd } from '../../sandbox/user-systemd.ts';
import { mcYaml, poolYaml } from '../helpers/manifests.ts';
import { startTestServer, type TestServer } from '../helpers/test-server.ts';

const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
let server: TestServer;
let c: Clients;
let host: SandboxHost | undefined;

const pool = poolYaml('worker', '  maxUnavailable: 100%\n  disruptionPolicy: {files: [{path: /etc/, actions: [{type: none}]}], units: [{name: rooted.service, actions: [{type: none}]}]}\n');
const config = mcYaml('50-rooted', 'worker', `  config:
    ignition: {version: 3.4.0}
    passwd: {users: [{name: core, sshAuthorizedKeys: ["ssh-ed25519 AAAA rooted"]}]}
    storage: {files: [{path: /etc/rooted.conf, contents: {source: "data:,rooted"}}]}
    systemd:
      units:
        - name: rooted.service
          contents: "[Service]\\nType=oneshot\\nExecStart=/bin/true\\n"
`);

before(async () => {
  if (skip) return;
  server = await startTestServer();
  c = server.admin();
  await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'p', text: pool }, { source: 'c', text: config }], dryRun: false }, 'apply');
});
after(async () => {
  if (skip) return;
  await host?.stop();
  await server.close();
});

test('--root DIR: the state directory, journal, unit directory, SSH keys, boot id and TLS files named in the config are all under DIR', { skip }, async () => {
  host = new SandboxHost({ name: 'rooted', server: server.address, pki: server.pki });
  const tag = randomBytes(4).toString('hex');
  const stateDir = `/var/lib/mcplane-rooted-${tag}`;
  const sshKeysDir = `/var/home-${tag}/core/.ssh/authorized_keys.d`;
  const certs = await server.pki.node('rooted');
  mkdirSync(join(host.root, 'etc/mcplane/pki'), { recursive: true });
  for (const k of ['ca', 'cert', 'key'] as const) copyFileSync(certs[k], join(host.root, `etc/mcplane/pki/${k}.pem`));
  writeFileSync(join(host.root, 'etc/mcplane/agent.yaml'), stringify({
    server: server.address,
    tls: { ca: '/etc/mcplane/pki/ca.pem', cert: '/etc/mcplane/pki/cert.pem', key: '/etc/mcplane/pki/key.pem' },
    labels: { 'node-role.kubernetes.io/worker': '' },
    paths: { stateDir, sshKeysDir },
  }));
  await host.startFromRoot();
  const target = (await call(c, c.status.getPool.bind(c.status), { name: 'worker' }, 'get')).status!.configuration;
  const node = await untilNode(c, [host], 'rooted', (n) => n.status!.currentConfig === target && n.status!.state === 'Done');

  const journal = JSON.parse(readFileSync(join(host.root, stateDir, 'journal.json'), 'utf8'));
  assert.equal(journal.currentConfig, target, 'the journal is in the state directory under the root');
  assert.equal(existsSync(stateDir), false, `nothing at ${stateDir} on the machine itself`);
  assert.equal(host.file('etc/rooted.conf'), 'rooted');
  assert.equal(host.file('etc/systemd/user/rooted.service'), '[Service]\nType=oneshot\nExecStart=/bin/true\n', 'the unit directory named in the config, under the root');
  assert.equal(host.file(`${sshKeysDir.slice(1)}/ignition`), 'ssh-ed25519 AAAA rooted\n');
  assert.equal(existsSync(`/var/home-${tag}`), false);
  assert.equal(node.status!.bootId, readFileSync(host.bootIdFile, 'utf8').trim(), 'the boot id file named in the config, under the root');
  assert.equal(host.systemd.systemctl('cat', 'rooted.service').status, 0, 'the user manager loads the unit from the root');
});
