// The set-up the tests against the Kubernetes API stand-in share, one of each per test: the
// stand-in, a server with a kubeconfig for it, and the simulated agents the test connects; after
// each test the agents close, then the server, then the stand-in. Shared because every file in
// test/kubernetes wrote these three variables and the same closing hook. The accessors are bound
// late (see serverFixture): `const { standIn, server } = kubeStandInPerTest()` reads like the
// variables it replaces, and each use goes to this test's stand-in and server.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'node:test';
import { startKubeApiStandIn, type KubeApiStandIn, type KubeApiStandInOptions } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { connectAgent, lateBound } from './server-fixture.ts';
import type { SimulatedAgent, SimulatedAgentOptions } from './simulated-agent.ts';
import { startTestServer, type TestServer } from './test-server.ts';

type ServerStartOptions = NonNullable<Parameters<typeof startTestServer>[0]>;

export interface KubeStandInFixture {
  standIn: KubeApiStandIn;
  server: TestServer;
  /** An admin client of this test's server (of the latest, after a restart). */
  c: Clients;
  /** Agents the test starts; each is closed before the server. */
  agents: SimulatedAgent[];
  /** Starts this test's stand-in (grace periods scaled to 0.01 unless given). */
  startStandIn(options?: KubeApiStandInOptions): Promise<KubeApiStandIn>;
  /**
   * Starts this test's server with a kubeconfig for the stand-in (none with `kubernetes: false`);
   * a server already running is closed first, so a test can restart on the same data directory.
   */
  startServer(options?: Omit<ServerStartOptions, 'kubernetes'> & { kubernetes?: false }): Promise<TestServer>;
  /** A simulated agent for node `name` with its certificate from the server's PKI, connected and in `agents`. */
  connectAgent(name: string, options?: Omit<Partial<SimulatedAgentOptions>, 'name'>): Promise<SimulatedAgent>;
}

/**
 * `beforeClose` runs after each test while all is still up (checks on what the stand-in saw), given
 * the test's stand-in if it started one.
 */
export function kubeStandInPerTest(options: { beforeClose?: (standIn: KubeApiStandIn | undefined) => void | Promise<void> } = {}): KubeStandInFixture {
  let standIn: KubeApiStandIn | undefined;
  let server: TestServer | undefined;
  let c: Clients | undefined;
  const agents: SimulatedAgent[] = [];
  afterEach(async () => {
    try {
      await options.beforeClose?.(standIn);
    } finally {
      for (const a of agents.splice(0)) a.close();
      await server?.close();
      await standIn?.close();
      server = undefined;
      c = undefined;
      standIn = undefined;
    }
  });
  const running = lateBound('the test server', () => server);
  return {
    standIn: lateBound('the Kubernetes API stand-in', () => standIn),
    server: running,
    c: lateBound('the admin client', () => c),
    agents,
    async startStandIn(standInOptions = {}) {
      standIn = await startKubeApiStandIn({ timeScale: 0.01, ...standInOptions });
      return standIn;
    },
    async startServer(serverOptions = {}) {
      const { kubernetes, ...rest } = serverOptions;
      await server?.close();
      server = undefined;
      const kube = kubernetes === false ? {} : { kubernetes: { kubeconfig: standIn!.writeKubeconfig(mkdtempSync(join(tmpdir(), 'kube-stand-in-'))) } };
      server = await startTestServer({ ...rest, ...kube });
      c = server.admin();
      return server;
    },
    connectAgent: (name, agentOptions) => connectAgent(running, agents, name, agentOptions),
  };
}
