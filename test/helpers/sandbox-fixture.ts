// The set-up the agent tests on sandboxed hosts share: a real server and its admin client for the
// whole file, optionally one systemd user manager the file's hosts use in turn (a start each would
// cost seconds), and the hosts the tests start, ended in after() before the manager and the server.
// Shared because each file wrote the same before()/after() pair around its own variables; the
// accessors are bound late (see serverFixture) so `const { server, c } = sandboxFixture()` reads
// like the variables it replaces. Where a systemd user manager cannot run, nothing starts and
// `skip` says why (the tests pass it to test()).

import { after, before } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import type { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd, startUserSystemd, type UserSystemd } from '../../sandbox/user-systemd.ts';
import { lateBound } from './server-fixture.ts';
import { startTestServer, type TestServer } from './test-server.ts';

export interface SandboxFixture {
  /** false, or why these tests cannot run here. */
  skip: string | false;
  server: TestServer;
  /** An admin client of the server. */
  c: Clients;
  /** The user manager the file's hosts share (only with `sharedSystemd`). */
  systemd: UserSystemd;
  /** Hosts the tests start; each is ended in after(). */
  hosts: SandboxHost[];
  /** Applies YAML documents, each as its own manifest. */
  apply(...texts: string[]): Promise<unknown>;
  /** A pool's rendered target. */
  target(pool?: string): Promise<string>;
}

export function sandboxFixture(options: { sharedSystemd?: boolean; setUp?: () => Promise<void> } = {}): SandboxFixture {
  const skip = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';
  let server: TestServer | undefined;
  let c: Clients | undefined;
  let systemd: UserSystemd | undefined;
  const hosts: SandboxHost[] = [];
  before(async () => {
    if (skip) return;
    server = await startTestServer();
    c = server.admin();
    if (options.sharedSystemd) systemd = await startUserSystemd();
    await options.setUp?.();
  });
  after(async () => {
    // A host on the shared manager is killed (the manager goes next); one with its own manager
    // is stopped, which stops that manager too.
    for (const h of hosts.splice(0)) await (options.sharedSystemd ? h.kill() : h.stop());
    await systemd?.stop();
    await server?.close();
  });
  const client = lateBound('the admin client', () => c);
  return {
    skip,
    server: lateBound('the test server', () => server),
    c: client,
    systemd: lateBound('the shared systemd user manager', () => systemd),
    hosts,
    apply: (...texts) => call(client, client.config.apply.bind(client.config), { manifests: texts.map((text, i) => ({ source: `${i}.yaml`, text })), dryRun: false }, 'apply'),
    target: async (pool = 'worker') => (await call(client, client.status.getPool.bind(client.status), { name: pool }, 'get')).status!.configuration,
  };
}
