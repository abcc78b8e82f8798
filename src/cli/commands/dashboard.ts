// mcctl dashboard: a live rollout view in the browser, served from this machine. Like
// `kubectl proxy`, it reaches the control plane with the operator's own credentials, over the
// same connection code and the same reconnecting Watch as `mcctl watch`; the control plane
// gains no new listener and no new way in.

import { ConfigurationError } from '../../machineconfig/index.ts';
import type { Clients } from '../client/connection.ts';
import { watchWithReconnect } from '../client/watch-stream.ts';
import { DASHBOARD_ADDRESS, DashboardServer } from '../dashboard/dashboard-server.ts';
import type { Io } from './read.ts';

export interface DashboardCommandOptions {
  port: string;
  address: string;
  /** Called once the page is served, with its URL (tests read it from stdout instead). */
  onReady?: (url: string) => void;
}

/** --address: the dashboard serves the operator's credentials' view, so only this machine may see it. */
export function checkDashboardAddress(address: string): void {
  if (address !== DASHBOARD_ADDRESS) {
    throw new ConfigurationError(`mcctl dashboard: --address ${address}: the dashboard listens on ${DASHBOARD_ADDRESS} only, because it shows what your credentials can read to whoever reaches it; to view it from another machine, forward the port over SSH (ssh -L PORT:127.0.0.1:PORT this-host)`);
  }
}

export function parseDashboardPort(text: string): number {
  const port = Number(text);
  if (!/^\d+$/.test(text) || port > 65535) throw new ConfigurationError(`mcctl dashboard: --port ${text}: must be a port number from 0 to 65535 (0: any free port)`);
  return port;
}

export async function dashboardCommand(c: Clients, io: Io, options: DashboardCommandOptions): Promise<void> {
  checkDashboardAddress(options.address);
  const port = parseDashboardPort(options.port);
  const dashboard = new DashboardServer({ port, controlPlane: c.server });
  let resolveFirst!: () => void;
  const first = new Promise<void>((resolve) => { resolveFirst = resolve; });
  const handle = watchWithReconnect(c, {
    pools: true,
    nodes: true,
    // A dashboard left open keeps trying, and says so on the page, for as long as it runs.
    giveUpAfterMs: Number.POSITIVE_INFINITY,
    notice(text) {
      io.err(text);
      const lost = /^mcctl: (lost the watch on .*)$/.exec(text.trim());
      if (lost) dashboard.setConnection('reconnecting', lost[1]!);
    },
    onSnapshot(events) {
      dashboard.model.applySnapshot(events);
      dashboard.setConnection('live');
      dashboard.changed();
      resolveFirst();
    },
    onChange(event) {
      dashboard.model.applyChange(event);
      dashboard.changed();
    },
  });
  // The first connection fails fast, as every other command does (unreachable server, wrong
  // credentials): nothing is served until the control plane has answered once.
  await Promise.race([first, handle.done]);
  let url: string;
  try {
    url = await dashboard.start();
  } catch (err) {
    handle.stop();
    throw err;
  }
  io.out(`Dashboard for ${c.server} at ${url}\n(open it in a browser on this machine; Ctrl-C to stop)\n`);
  options.onReady?.(url);

  const stop = (): void => handle.stop();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    await handle.done;
  } catch (err) {
    // Credentials revoked or permission lost while running: the page says so before it ends.
    dashboard.setConnection('failed', (err as Error).message);
    throw err;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    await dashboard.close();
  }
}
