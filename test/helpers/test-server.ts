// A real mcplane-server in this process: gRPC over loopback TLS on port 0, SQLite in a temp dir.

import { createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type Clients } from '../../src/cli/client/connection.ts';
import type { Clock } from '../../src/controlplane/replica/clock.ts';
import { startServer, type ServerHandle, type ServerOptions } from '../../src/controlplane/server.ts';
import { startEtcdCluster, type EtcdCluster } from '../../sandbox/etcd-cluster.ts';
import { createLogger } from '../../src/runtime/logger.ts';
import { silenceIpServernameWarning } from '../../src/runtime/process-warnings.ts';

silenceIpServernameWarning();
import { testPki, type TestPki } from './test-pki.ts';
import { scaled } from './time-scale.ts';

export interface TestServer {
  handle: ServerHandle;
  address: string;
  dataDir: string;
  pki: TestPki;
  logs: string[];
  admin(): Clients;
  close(): Promise<void>;
}

/**
 * MCPLANE_TEST_STORE=etcd runs every test server on a real etcd (one member per test process),
 * each under its own key prefix, so the whole suite runs on both backends.
 */
const STORE = process.env.MCPLANE_TEST_STORE ?? 'sqlite';
let sharedEtcd: Promise<EtcdCluster> | undefined;

function etcdFor(dataDir: string): Promise<ServerOptions['etcd']> {
  sharedEtcd ??= startEtcdCluster({ members: 1 }).then((etcd) => {
    etcd.unref();
    return etcd;
  });
  // The prefix follows the data dir, so a test that restarts a server on its data dir finds
  // its objects again, as it would with SQLite.
  return sharedEtcd.then((etcd) => ({ endpoints: etcd.endpoints, prefix: `/mcplane-test/${createHash('sha256').update(dataDir).digest('hex').slice(0, 16)}/` }));
}

export async function startTestServer(options: { dataDir?: string; listen?: string; bootstrap?: boolean | Partial<NonNullable<ServerOptions['bootstrap']>>; tokenSweepMs?: number; clock?: Clock; metrics?: ServerOptions['metrics']; kubernetes?: ServerOptions['kubernetes']; drain?: ServerOptions['drain']; kubernetesSource?: boolean; signing?: boolean; nodeCertificateLifetimeMs?: number; watchBacklog?: number; statusListen?: string; audit?: ServerOptions['audit'] } = {}): Promise<TestServer> {
  const pki = await testPki();
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'mcplane-data-'));
  const logs: string[] = [];
  const handle = await startServer({
    dataDir,
    ...(STORE === 'etcd' ? { etcd: await etcdFor(dataDir) } : {}),
    ...(options.tokenSweepMs ? { tokenSweepMs: options.tokenSweepMs } : {}),
    ...(options.watchBacklog ? { watchBacklog: options.watchBacklog } : {}),
    ...(options.statusListen ? { statusListen: options.statusListen } : {}),
    ...(options.audit ? { audit: options.audit } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.metrics ? { metrics: options.metrics } : {}),
    ...(options.kubernetes ? { kubernetes: options.kubernetes } : {}),
    ...(options.drain ? { drain: options.drain } : {}),
    ...(options.kubernetesSource ? { kubernetesSource: true } : {}),
    // With signing, this server renews node certificates (it holds the CA key).
    ...(options.signing ? { caKeyFile: join(pki.dir, 'ca.key') } : {}),
    ...(options.nodeCertificateLifetimeMs ? { nodeCertificateLifetimeMs: options.nodeCertificateLifetimeMs } : {}),
    listen: options.listen ?? '127.0.0.1:0',
    tls: { ca: join(pki.dir, 'ca.crt'), cert: join(pki.dir, 'server.crt'), key: join(pki.dir, 'server.key') },
    ...(options.bootstrap
      ? { bootstrap: { listen: '127.0.0.1:0', caKeyFile: join(pki.dir, 'ca.key'), tokenFile: join(pki.dir, 'bootstrap-token'), ...(typeof options.bootstrap === 'object' ? options.bootstrap : {}) } }
      : {}),
    log: createLogger({ level: process.env.MCPLANE_TEST_LOG ?? 'info', write: (line) => logs.push(line) }),
  });
  const address = `127.0.0.1:${handle.grpcPort}`;
  const clients: Clients[] = [];
  return {
    handle,
    address,
    dataDir,
    pki,
    logs,
    admin() {
      // mcctl's 10 s per call, scaled: a call right after a 17 MB refusal waited longer at load 15.
      const c = connect({ server: address, pkiDir: pki.dir, config: '/dev/null', requestTimeout: `${Math.ceil(scaled(10_000) / 1000)}s` });
      clients.push(c);
      return c;
    },
    async close() {
      for (const c of clients) c.close();
      await handle.close(1000);
    },
  };
}
