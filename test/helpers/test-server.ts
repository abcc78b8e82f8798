// A real mcplane-server in this process: gRPC over loopback TLS on port 0, SQLite in a temp dir.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type Clients } from '../../src/cli/client/connection.ts';
import { startServer, type ServerHandle } from '../../src/controlplane/server.ts';
import { createLogger } from '../../src/runtime/logger.ts';
import { silenceIpServernameWarning } from '../../src/runtime/process-warnings.ts';

silenceIpServernameWarning();
import { testPki, type TestPki } from './test-pki.ts';

export interface TestServer {
  handle: ServerHandle;
  address: string;
  dataDir: string;
  pki: TestPki;
  logs: string[];
  admin(): Clients;
  close(): Promise<void>;
}

export async function startTestServer(options: { dataDir?: string; bootstrap?: boolean } = {}): Promise<TestServer> {
  const pki = await testPki();
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'mcplane-data-'));
  const logs: string[] = [];
  const handle = await startServer({
    dataDir,
    listen: '127.0.0.1:0',
    tls: { ca: join(pki.dir, 'ca.crt'), cert: join(pki.dir, 'server.crt'), key: join(pki.dir, 'server.key') },
    ...(options.bootstrap
      ? { bootstrap: { listen: '127.0.0.1:0', caKeyFile: join(pki.dir, 'ca.key'), tokenFile: join(pki.dir, 'bootstrap-token') } }
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
      const c = connect({ server: address, pkiDir: pki.dir, config: '/dev/null' });
      clients.push(c);
      return c;
    },
    async close() {
      for (const c of clients) c.close();
      await handle.close(1000);
    },
  };
}
