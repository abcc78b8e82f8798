// untilNode (test/helpers/converge.ts) fed by StatusService.Watch instead of a GetNode every 50 ms.
// A waiting test then costs the CPU of the node's changes rather than about 5% of a core for as
// long as it waits, which on a loaded machine (where the waits stretch) was a large part of the
// sandboxed agent files' CPU. Every change the server publishes is seen, a passing one too (a
// poll sees only the state at its instant). The reboots hosts ask for are still performed, from
// a cheap check of each host's marker file.

import type { Clients } from '../../src/cli/client/connection.ts';
import type { Node__Output } from '../../src/runtime/generated/mcplane/v1/Node.ts';
import type { WatchEvent__Output } from '../../src/runtime/generated/mcplane/v1/WatchEvent.ts';
import type { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { scaled } from './time-scale.ts';

/** Waits until node `name` satisfies `done`, as untilNode does (same budget, same scaling). */
export async function untilNodeWatched(c: Clients, hosts: SandboxHost[], name: string, done: (n: Node__Output) => boolean, quietTimeoutMs = 60_000): Promise<Node__Output> {
  const timeoutMs = scaled(quietTimeoutMs);
  const stream = c.status.watch({ nodes: true });
  let last: Node__Output | undefined;
  let timer: NodeJS.Timeout | undefined;
  let reboots: NodeJS.Timeout | undefined;
  try {
    return await new Promise<Node__Output>((resolve, reject) => {
      timer = setTimeout(() => {
        const logs = hosts.flatMap((h) => h.logs.slice(-15).map((l) => `${h.options.name}: ${l}`)).join('\n');
        reject(new Error(`node ${name} did not converge within ${timeoutMs} ms (watched); last status ${JSON.stringify(last?.status)}\n${logs}`));
      }, timeoutMs);
      let rebooting = false;
      reboots = setInterval(() => {
        if (rebooting) return;
        rebooting = true;
        void (async () => { for (const h of hosts) await h.rebootIfRequested(); })().catch(reject).finally(() => { rebooting = false; });
      }, 100);
      stream.on('data', (e: WatchEvent__Output) => {
        if (e.node?.name !== name) return;
        last = e.node;
        if (done(e.node)) resolve(e.node);
      });
      stream.on('error', (err: Error) => reject(new Error(`node ${name}: the watch failed: ${err.message}`)));
      stream.on('end', () => reject(new Error(`node ${name}: the watch ended; last status ${JSON.stringify(last?.status)}`)));
    });
  } finally {
    clearTimeout(timer);
    clearInterval(reboots);
    stream.removeAllListeners('data');
    stream.on('error', () => undefined); // the cancellation's own CANCELLED
    stream.cancel();
  }
}
