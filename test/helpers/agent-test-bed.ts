// What the agent tests that crash, freeze or race their hosts share: a control plane with the
// pool applied, and one systemd user manager the file's hosts use in turn (one per host would
// cost a start each, and these tests run one host at a time).

import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { startUserSystemd, type UserSystemd } from '../../sandbox/user-systemd.ts';
import { startTestServer, type TestServer } from './test-server.ts';

export interface AgentTestBed {
  server: TestServer;
  c: Clients;
  systemd: UserSystemd;
  close(): Promise<void>;
}

export async function startAgentTestBed(pool: string): Promise<AgentTestBed> {
  const server = await startTestServer();
  const c = server.admin();
  let systemd: UserSystemd | undefined;
  try {
    systemd = await startUserSystemd();
    await call(c, c.config.apply.bind(c.config), { manifests: [{ source: 'pool.yaml', text: pool }], dryRun: false }, 'apply');
  } catch (err) {
    // Nothing left running behind the error the test reports.
    await systemd?.stop();
    await server.close();
    throw err;
  }
  return {
    server, c, systemd,
    async close() {
      await systemd.stop();
      await server.close();
    },
  };
}
