// Real etcd members (Debian's etcd-server, /usr/bin/etcd) for tests and bench scripts: loopback
// ports picked by binding port 0, a temp data dir each, `--initial-cluster` for three. Elections
// are fast (50 ms heartbeats, 500 ms election timeout) so a killed leader is replaced in about a
// second; etcd's minimum lease TTL then is ceil(1.5 x 0.5 s) = 1 s instead of 2 s.

import { credentials, loadPackageDefinition, type GrpcObject, type ServiceClientConstructor, type ServiceError } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, createWriteStream } from 'node:fs';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EtcdConnection } from '../src/controlplane/store/etcd-connection.ts';

export const ETCD_BINARY = process.env.MCPLANE_ETCD ?? '/usr/bin/etcd';

export interface EtcdClusterOptions {
  members: 1 | 3;
  /** Milliseconds; etcd's defaults are 100 and 1000. */
  heartbeatMs?: number;
  electionMs?: number;
  /** How often etcd tells idle watches how far they are (--experimental-watch-progress-notify-interval). */
  progressNotifyMs?: number;
  /**
   * PEM files: the members serve clients over TLS with the server pair and require a client
   * certificate the CA signed (--client-cert-auth); the helper's own calls use the client pair.
   */
  tls?: { ca: string; server: { cert: string; key: string }; client: { cert: string; key: string } };
  /**
   * The address members serve clients on (default 127.0.0.1), e.g. this machine's own
   * non-loopback address to test what mcplane does with etcd off loopback.
   */
  clientHost?: string;
}

/** etcd RBAC as `etcdctl role add / grant-permission / user add / grant-role / auth enable` make it. */
export interface EtcdAuthSpec {
  /** A role with read-write on keys under `prefix` only. */
  role: string;
  prefix: string;
  /**
   * Users granted `role`. With --client-cert-auth etcd takes a client certificate's CN as the
   * user name, so these are the CNs that may use the prefix.
   */
  users: string[];
}

export interface EtcdCluster {
  /** Client endpoints, host:port, member i at index i. */
  endpoints: string[];
  dir: string;
  /** SIGKILL member i and wait until it is gone. */
  kill(i: number): Promise<void>;
  /** The running members' process ids (a benchmark pins them to a CPU). */
  pids(): number[];
  /** Start member i again on its data dir and ports; resolves once it reports healthy. */
  restart(i: number): Promise<void>;
  /** Compacts etcd's history up to `revision` (the Compact RPC, waiting for the physical one). */
  compact(revision: number): Promise<void>;
  /** The index of the member that is the Raft leader now. */
  leader(): Promise<number>;
  /**
   * Turns etcd's authentication on: a `root` user (which the helper's own client certificate,
   * CN=root, then acts as: it needs TLS with a client certificate) and `spec`'s role and users.
   */
  enableAuth(spec: EtcdAuthSpec): Promise<void>;
  /** Kills every member and removes the data dirs. */
  stop(): Promise<void>;
  /**
   * Lets this process end while the members run (a cluster shared by a whole test file, never
   * stopped explicitly); they are killed when it exits.
   */
  unref(): void;
}

interface MemberProcess {
  name: string;
  clientPort: number;
  peerPort: number;
  dataDir: string;
  logFile: string;
  child?: ChildProcess;
}

/** Members still running: killed when this process exits, so a crashed test leaves none behind. */
const running = new Set<ChildProcess>();
let exitHookInstalled = false;

function track(child: ChildProcess): void {
  running.add(child);
  child.once('exit', () => running.delete(child));
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const c of running) c.kill('SIGKILL');
  });
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

/**
 * A port picked free was taken by someone else before etcd bound it (tests start clusters side by
 * side, and freePort() can only release its port before etcd takes it): start again on new ports.
 */
class PortTakenError extends Error {}

export async function startEtcdCluster(options: EtcdClusterOptions): Promise<EtcdCluster> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startEtcdClusterOnce(options);
    } catch (err) {
      if (!(err instanceof PortTakenError) || attempt >= 5) throw err;
    }
  }
}

async function startEtcdClusterOnce(options: EtcdClusterOptions): Promise<EtcdCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'mcplane-etcd-'));
  const token = `mcplane-test-${randomBytes(4).toString('hex')}`;
  const members: MemberProcess[] = [];
  for (let i = 0; i < options.members; i++) {
    members.push({ name: `m${i}`, clientPort: await freePort(), peerPort: await freePort(), dataDir: join(dir, `m${i}.etcd`), logFile: join(dir, `m${i}.log`) });
  }
  const initialCluster = members.map((m) => `${m.name}=http://127.0.0.1:${m.peerPort}`).join(',');
  const scheme = options.tls ? 'https' : 'http';
  const clientHost = options.clientHost ?? '127.0.0.1';
  const heartbeat = options.heartbeatMs ?? 50;
  const election = options.electionMs ?? 500;
  writeFileSync(join(dir, 'README'), `etcd test cluster ${token}\n`);

  const start = (m: MemberProcess): void => {
    const args = [
      `--name=${m.name}`,
      `--data-dir=${m.dataDir}`,
      `--listen-client-urls=${scheme}://${clientHost}:${m.clientPort}`,
      `--advertise-client-urls=${scheme}://${clientHost}:${m.clientPort}`,
      ...(options.tls ? [`--cert-file=${options.tls.server.cert}`, `--key-file=${options.tls.server.key}`, `--trusted-ca-file=${options.tls.ca}`, '--client-cert-auth'] : []),
      `--listen-peer-urls=http://127.0.0.1:${m.peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${m.peerPort}`,
      `--initial-cluster=${initialCluster}`,
      `--initial-cluster-token=${token}`,
      '--initial-cluster-state=new',
      `--heartbeat-interval=${heartbeat}`,
      `--election-timeout=${election}`,
      ...(options.progressNotifyMs ? [`--experimental-watch-progress-notify-interval=${options.progressNotifyMs}ms`] : []),
      '--logger=zap',
      '--log-outputs=stderr',
      '--log-level=warn',
    ];
    const log = createWriteStream(m.logFile, { flags: 'a' });
    const child = spawn(ETCD_BINARY, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr!.pipe(log);
    child.on('error', () => { /* reported by waitHealthy */ });
    track(child);
    m.child = child;
  };

  const alive = (m: MemberProcess) => m.child !== undefined && m.child.exitCode === null && m.child.signalCode === null;

  const waitHealthy = async (m: MemberProcess, timeoutMs = 30_000): Promise<void> => {
    const until = Date.now() + timeoutMs;
    for (;;) {
      if (!alive(m)) {
        // Its stderr reaches the log through a pipe: give the last lines a moment to land.
        await new Promise((r) => setTimeout(r, 100));
        const taken = readFileSync(m.logFile, 'utf8').includes('address already in use');
        throw new (taken ? PortTakenError : Error)(`etcd member ${m.name} exited while starting; see ${m.logFile}`);
      }
      try {
        if ((await health(clientHost, m.clientPort, options.tls)) === 'true') return;
      } catch { /* not up yet */ }
      if (Date.now() > until) throw new Error(`etcd member ${m.name} not healthy after ${timeoutMs} ms; see ${m.logFile}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  const killMember = async (m: MemberProcess): Promise<void> => {
    const child = m.child;
    if (!child || !alive(m)) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  };

  for (const m of members) start(m);
  // A test process that dies without stop() must not leave etcd members running.
  process.once('exit', () => {
    for (const m of members) if (alive(m)) m.child!.kill('SIGKILL');
  });
  try {
    await Promise.all(members.map((m) => waitHealthy(m)));
  } catch (err) {
    await Promise.all(members.map(killMember));
    throw err;
  }
  const endpoints = members.map((m) => `${clientHost}:${m.clientPort}`);

  const withConnection = async <T>(fn: (c: EtcdConnection) => Promise<T>): Promise<T> => {
    const live = members.filter(alive).map((m) => `${clientHost}:${m.clientPort}`);
    const connection = new EtcdConnection(live.length ? live : endpoints, tlsBuffers(options.tls), 10_000);
    try {
      return await fn(connection);
    } finally {
      connection.close();
    }
  };

  return {
    endpoints,
    dir,
    async kill(i) {
      await killMember(members[i]!);
    },
    pids: () => members.filter(alive).map((m) => m.child!.pid!),
    async restart(i) {
      const m = members[i]!;
      await killMember(m);
      start(m);
      await waitHealthy(m);
    },
    async compact(revision) {
      await withConnection((c) => c.unary('KV', 'Compact', { revision: String(revision), physical: true }, `Compact ${revision}`));
    },
    async leader() {
      for (let i = 0; i < members.length; i++) {
        if (!alive(members[i]!)) continue;
        const c = new EtcdConnection([endpoints[i]!], tlsBuffers(options.tls), 5_000);
        try {
          const res = await c.unary<{ header: { member_id: string }; leader: string }>('Maintenance', 'Status', {}, 'Status');
          if (res.leader !== '0' && res.leader === res.header.member_id) return i;
        } catch { /* try the next */ } finally {
          c.close();
        }
      }
      throw new Error('no etcd member is the leader');
    },
    async enableAuth(spec) {
      if (!options.tls) throw new Error('enableAuth needs a TLS cluster: the helper acts as root by its client certificate (CN=root)');
      const Auth = loadAuthService();
      const client = new Auth(endpoints[0]!, credentials.createSsl(...tlsTriple(options.tls)));
      const call = (method: string, request: object): Promise<void> => new Promise((resolve, reject) => {
        (client as unknown as Record<string, (r: object, o: object, cb: (err: ServiceError | null) => void) => void>)[method]!
          .call(client, request, { deadline: new Date(Date.now() + 10_000) }, (err) => (err ? reject(new Error(`etcd Auth.${method}: ${err.message}`)) : resolve()));
      });
      try {
        // The same steps as: etcdctl user add root; etcdctl user grant-role root root;
        // etcdctl role add R; etcdctl role grant-permission R readwrite PREFIX --prefix;
        // etcdctl user add U; etcdctl user grant-role U R; etcdctl auth enable.
        await call('UserAdd', { name: 'root', password: randomBytes(16).toString('hex') });
        await call('UserGrantRole', { user: 'root', role: 'root' });
        await call('RoleAdd', { name: spec.role });
        await call('RoleGrantPermission', { name: spec.role, perm: { permType: 'READWRITE', key: Buffer.from(spec.prefix), range_end: prefixEnd(spec.prefix) } });
        for (const user of spec.users) {
          // A password nobody knows: the user signs in by its certificate's CN only.
          await call('UserAdd', { name: user, password: randomBytes(16).toString('hex') });
          await call('UserGrantRole', { user, role: spec.role });
        }
        await call('AuthEnable', {});
      } finally {
        client.close();
      }
    },
    async stop() {
      await Promise.all(members.map(killMember));
      rmSync(dir, { recursive: true, force: true });
    },
    unref() {
      for (const m of members) {
        m.child?.unref();
        (m.child?.stderr as { unref?: () => void } | null | undefined)?.unref?.();
      }
      // The members still die with this process (the exit hook above); their data goes too.
      process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    },
  };
}

function tlsBuffers(tls: EtcdClusterOptions['tls']): { ca: Buffer; cert: Buffer; key: Buffer } | undefined {
  return tls && { ca: readFileSync(tls.ca), cert: readFileSync(tls.client.cert), key: readFileSync(tls.client.key) };
}

function tlsTriple(tls: NonNullable<EtcdClusterOptions['tls']>): [Buffer, Buffer, Buffer] {
  const b = tlsBuffers(tls)!;
  return [b.ca, b.key, b.cert];
}

let authService: ServiceClientConstructor | undefined;

function loadAuthService(): ServiceClientConstructor {
  if (!authService) {
    const definition = loadSync(fileURLToPath(new URL('./etcd-auth.proto', import.meta.url)), { keepCase: true, enums: String, defaults: true });
    authService = ((loadPackageDefinition(definition) as GrpcObject).etcdserverpb as GrpcObject).Auth as ServiceClientConstructor;
  }
  return authService;
}

/** The range end that covers every key starting with `prefix` (etcdctl's --prefix). */
function prefixEnd(prefix: string): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]! += 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

/** etcd's /health answer ("true" once the member has a leader), over TLS when the member uses it. */
function health(host: string, port: number, tls: EtcdClusterOptions['tls']): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const onResponse = (res: import('node:http').IncomingMessage) => {
      let body = '';
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => {
        try {
          resolve((JSON.parse(body) as { health?: string }).health);
        } catch (err) {
          reject(err);
        }
      });
    };
    const req = tls
      ? httpsGet({ host, port, path: '/health', timeout: 1_000, ...tlsBuffers(tls) }, onResponse)
      : httpGet({ host, port, path: '/health', timeout: 1_000 }, onResponse);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}
