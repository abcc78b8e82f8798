// The set-up the agent tests on sandboxed hosts share: a real server, its admin client, the hosts
// the tests start, and optionally one systemd user manager those hosts use in turn (a start each
// would cost seconds). Two scopes, because the files want two lifetimes:
//   - 'file' (the default): one server for the whole file, started in before() with `manifests`
//     applied (the pool the file's hosts join), everything ended in after();
//   - 'test': each test starts its own server (`fx.server = await startTestServer()`, so a test
//     may stop it and start another on the same data mid-way) and hosts; afterEach() stops them.
// Hosts are always ended before their manager and the server (their agents would otherwise log
// reconnects to a server that is gone). One fixture instead of three (the per-file fixture, the
// per-test fleet and the crash tests' bed), which each file wrapped in the same before()/after()
// pair around its own variables. The accessors are bound late (see serverFixture) so
// `const { server, c } = sandboxFixture()` reads like the variables it replaces. Where a systemd
// user manager cannot run, nothing starts and `skip` says why (the tests pass it to test()).

import { after, afterEach, before } from 'node:test';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import type { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { canRunUserSystemd, startUserSystemd, type UserSystemd } from '../../sandbox/user-systemd.ts';
import { lateBound } from './server-fixture.ts';
import { startTestServer, type TestServer } from './test-server.ts';

/** node:test's skip for tests whose hosts need a systemd user manager. */
export const skipWithoutUserSystemd = !canRunUserSystemd() && 'needs root to start a systemd user manager in a private mount namespace';

export interface SandboxFixture {
  /** false, or why these tests cannot run here. */
  skip: string | false;
  /**
   * The server now. Scope 'test': the test assigns the one it starts (and undefined once it has
   * closed it itself); afterEach() closes whatever is assigned then.
   */
  get server(): TestServer;
  set server(s: TestServer | undefined);
  /** An admin client of the server now. */
  c: Clients;
  /** The user manager the file's hosts share (only with `sharedSystemd`). */
  systemd: UserSystemd;
  /** Hosts the tests start; emptied in place when they are ended, so a file may keep a reference. */
  readonly hosts: SandboxHost[];
  /** Applies YAML documents, each as its own manifest. */
  apply(...texts: string[]): Promise<unknown>;
  /** A pool's rendered target. */
  target(pool?: string): Promise<string>;
}

export interface SandboxFixtureOptions {
  /** 'file' (default): one server for the file; 'test': each test starts its own. */
  scope?: 'file' | 'test';
  /** One systemd user manager for the file's hosts (scope 'file' only). */
  sharedSystemd?: boolean;
  /** Applied once the server runs (scope 'file'): typically the pool the hosts join. */
  manifests?: string[];
  /** More set-up after the server, the manager and the manifests (scope 'file'). */
  setUp?: () => Promise<void>;
  /**
   * The set-up's bound, for a setUp that does what several tests did each within their own
   * (by default the run's --test-timeout, which bounds a before() hook as it bounds a test).
   */
  setUpTimeoutMs?: number;
}

export function sandboxFixture(options: SandboxFixtureOptions = {}): SandboxFixture {
  const skip = skipWithoutUserSystemd;
  const perTest = options.scope === 'test';
  if (perTest && (options.sharedSystemd || options.manifests || options.setUp)) throw new Error('sandboxFixture: sharedSystemd, manifests and setUp are for scope \'file\'');
  let server: TestServer | undefined;
  let c: Clients | undefined;
  let systemd: UserSystemd | undefined;
  const hosts: SandboxHost[] = [];
  const client = lateBound('the admin client', () => c);
  const running = lateBound('the test server', () => server);
  const apply = (...texts: string[]) => call(client, client.config.apply.bind(client.config), { manifests: texts.map((text, i) => ({ source: `${i}.yaml`, text })), dryRun: false }, 'apply');

  async function end(): Promise<void> {
    // A host on the shared manager is killed (the manager goes next); one with its own manager
    // is stopped, which stops that manager too.
    for (const h of hosts.splice(0)) await (options.sharedSystemd ? h.kill() : h.stop());
    await systemd?.stop();
    systemd = undefined;
    await server?.close();
    server = undefined;
    c = undefined;
  }
  if (perTest) {
    afterEach(end);
  } else {
    before(async () => {
      if (skip) return;
      server = await startTestServer();
      c = server.admin();
      if (options.sharedSystemd) systemd = await startUserSystemd();
      if (options.manifests?.length) await apply(...options.manifests);
      await options.setUp?.();
    }, options.setUpTimeoutMs ? { timeout: options.setUpTimeoutMs } : {});
    after(end);
  }
  return {
    skip,
    get server(): TestServer { return running; },
    set server(s: TestServer | undefined) {
      server = s;
      c = s?.admin();
    },
    c: client,
    systemd: lateBound('the shared systemd user manager', () => systemd),
    hosts,
    apply,
    target: async (pool = 'worker') => (await call(client, client.status.getPool.bind(client.status), { name: pool }, 'get')).status!.configuration,
  };
}
