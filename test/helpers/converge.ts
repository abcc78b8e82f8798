import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import type { Node__Output } from '../../src/runtime/generated/mcplane/v1/Node.ts';
import type { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { scaled } from './time-scale.ts';

/** Polls a node until `done` holds, performing the reboots hosts ask for meanwhile. */
export async function untilNode(c: Clients, hosts: SandboxHost[], name: string, done: (n: Node__Output) => boolean, quietTimeoutMs = 60_000): Promise<Node__Output> {
  const timeoutMs = scaled(quietTimeoutMs);
  const deadline = Date.now() + timeoutMs;
  let last: Node__Output | undefined;
  for (;;) {
    for (const h of hosts) await h.rebootIfRequested();
    try {
      last = await call(c, c.status.getNode.bind(c.status), { name }, 'get node');
      if (done(last)) return last;
    } catch { /* not registered yet */ }
    if (Date.now() > deadline) {
      const logs = hosts.flatMap((h) => h.logs.slice(-15).map((l) => `${h.options.name}: ${l}`)).join('\n');
      throw new Error(`node ${name} did not converge within ${timeoutMs} ms; last status ${JSON.stringify(last?.status)}\n${logs}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Starts `host` (added to `hosts`, which the caller stops) and waits until its node runs the
 * config its pool targets now, Done: a host joined and converged.
 */
export async function startOnPoolTarget(c: Clients, hosts: SandboxHost[], host: SandboxHost, pool: string): Promise<SandboxHost> {
  hosts.push(host);
  await host.start();
  const want = (await call(c, c.status.getPool.bind(c.status), { name: pool }, 'get pool')).status!.configuration;
  await untilNode(c, [host], host.options.name, (n) => n.status!.currentConfig === want && n.status!.state === 'Done');
  return host;
}

export async function untilPoolUpdated(c: Clients, hosts: SandboxHost[], pool: string, count: number, quietTimeoutMs = 90_000): Promise<void> {
  const timeoutMs = scaled(quietTimeoutMs);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const h of hosts) await h.rebootIfRequested();
    const p = await call(c, c.status.getPool.bind(c.status), { name: pool }, 'get pool');
    const updated = p.status!.conditions.find((x) => x.type === 'Updated')?.status === 'True';
    if (updated && p.status!.machineCount === count) return;
    if (Date.now() > deadline) {
      const logs = hosts.flatMap((h) => h.logs.slice(-10).map((l) => `${h.options.name}: ${l}`)).join('\n');
      throw new Error(`pool ${pool} not Updated within ${timeoutMs} ms: ${JSON.stringify(p.status)}\n${logs}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
