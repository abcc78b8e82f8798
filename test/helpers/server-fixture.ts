// The test-server set-up most API tests share, registered once instead of written out in every
// file (as grpc-js's test fixtures and controller-runtime's envtest do): a real server started in
// before() (or per test), an admin client, and the simulated agents the file starts, all closed
// after. The accessors are bound late because node:test runs before() after the file's top level:
// `const { server, c } = serverFixture()` reads like the variables it replaces, and each use goes
// to the server running at that moment.

import { after, afterEach, before } from 'node:test';
import type { Clients } from '../../src/cli/client/connection.ts';
import { startEtcdCluster, type EtcdCluster, type EtcdClusterOptions } from '../../sandbox/etcd-cluster.ts';
import { startReplicaSet, type ReplicaSet, type ReplicaSetOptions } from './replica-set.ts';
import { SimulatedAgent, type SimulatedAgentOptions } from './simulated-agent.ts';
import { testPki, type TestPki } from './test-pki.ts';
import { startTestServer, type TestServer } from './test-server.ts';

type ServerStartOptions = NonNullable<Parameters<typeof startTestServer>[0]>;

/** An object that forwards to what `get` returns at each use; used before there is one, it says so. */
export function lateBound<T extends object>(what: string, get: () => T | undefined): T {
  const now = (): T => {
    const value = get();
    if (value === undefined) throw new Error(`${what} is not running here: it exists only between its fixture's start and close`);
    return value;
  };
  return new Proxy({} as T, {
    get: (_, key) => Reflect.get(now(), key),
    set: (_, key, value) => Reflect.set(now(), key, value),
    has: (_, key) => Reflect.has(now(), key),
    ownKeys: () => Reflect.ownKeys(now()),
    getOwnPropertyDescriptor: (_, key) => {
      const d = Reflect.getOwnPropertyDescriptor(now(), key);
      return d && { ...d, configurable: true };
    },
  });
}

export interface ServerFixture {
  /** The running server. */
  server: TestServer;
  /** An admin client of it. */
  c: Clients;
  /** Agents the tests start; each is closed before the server. */
  agents: SimulatedAgent[];
  /** mcctl's connection flags for this server, for runCli/runCliAsync. */
  conn: string[];
  /**
   * A simulated agent for node `name`, with its certificate from the server's PKI, connected and
   * in `agents` (so closed with the others): the start most agent-facing tests write out.
   */
  connectAgent(name: string, options?: Omit<Partial<SimulatedAgentOptions>, 'name'>): Promise<SimulatedAgent>;
}

/**
 * One server for the whole file: started in before(), closed (agents first) in after(). What the
 * file sets up on it goes in `setUp`, which runs in the same hook: node:test runs a second
 * top-level before() as soon as it is registered, before the first one's server is up.
 */
export function serverFixture(options: ServerStartOptions = {}, setUp?: () => Promise<void>): ServerFixture {
  let server: TestServer | undefined;
  let c: Clients | undefined;
  const agents: SimulatedAgent[] = [];
  before(async () => {
    server = await startTestServer(options);
    c = server.admin();
    await setUp?.();
  });
  after(async () => {
    for (const a of agents.splice(0)) a.close();
    await server?.close();
    server = undefined;
    c = undefined;
  });
  return fixtureView(() => server, () => c, agents);
}

export interface PerTestServer extends ServerFixture {
  /** Starts this test's server (each test starts its own, with its own options). */
  start(options?: ServerStartOptions): Promise<TestServer>;
}

/** A server per test: the test calls start(); afterEach() closes its agents and its server. */
export function serverPerTest(): PerTestServer {
  let server: TestServer | undefined;
  let c: Clients | undefined;
  const agents: SimulatedAgent[] = [];
  afterEach(async () => {
    for (const a of agents.splice(0)) a.close();
    await server?.close();
    server = undefined;
    c = undefined;
  });
  return {
    ...fixtureView(() => server, () => c, agents),
    async start(options = {}) {
      server = await startTestServer(options);
      c = server.admin();
      return server;
    },
  };
}

export interface ReplicaSetFixture {
  pki: TestPki;
  etcd: EtcdCluster;
  set: ReplicaSet;
  /** Agents the tests start; each is closed before the replicas stop. */
  agents: SimulatedAgent[];
}

/** mcplane-server replicas on a real etcd for the whole file: started in before(), stopped in after(). */
export function replicaSetFixture(options: { members: EtcdClusterOptions['members']; count: number } & Omit<ReplicaSetOptions, 'endpoints' | 'count' | 'pkiDir'>): ReplicaSetFixture {
  const { members, ...replicas } = options;
  let pki: TestPki | undefined;
  let etcd: EtcdCluster | undefined;
  let set: ReplicaSet | undefined;
  const agents: SimulatedAgent[] = [];
  before(async () => {
    pki = await testPki();
    etcd = await startEtcdCluster({ members });
    set = await startReplicaSet({ ...replicas, endpoints: etcd.endpoints, pkiDir: pki.dir });
  });
  after(async () => {
    for (const a of agents.splice(0)) a.close();
    await set?.stop();
    await etcd?.stop();
    set = undefined;
    etcd = undefined;
  });
  return { pki: lateBound('the test PKI', () => pki), etcd: lateBound('etcd', () => etcd), set: lateBound('the replica set', () => set), agents };
}

/** A simulated agent for node `name` on `server` (its certificate from the server's PKI), connected and added to `agents`. */
export async function connectAgent(server: TestServer, agents: SimulatedAgent[], name: string, options: Omit<Partial<SimulatedAgentOptions>, 'name'> = {}): Promise<SimulatedAgent> {
  const agent = new SimulatedAgent({ address: server.address, tls: await server.pki.node(name), name, ...options });
  agents.push(agent);
  await agent.connect();
  return agent;
}

function fixtureView(server: () => TestServer | undefined, c: () => Clients | undefined, agents: SimulatedAgent[]): ServerFixture {
  const running = lateBound('the test server', server);
  const connFlags = () => {
    const s = server();
    return s && ['--server', s.address, '--pki-dir', s.pki.dir, '--config', '/dev/null'];
  };
  return {
    server: running, c: lateBound('the admin client', c), agents, conn: lateBound('the test server', connFlags),
    connectAgent: (name, options) => connectAgent(running, agents, name, options),
  };
}
