// mcctl watch: the current state, then one line per change, until interrupted.

import { status as Status, type ServiceError } from '@grpc/grpc-js';
import type { WatchEvent__Output } from '../../runtime/generated/mcplane/v1/WatchEvent.ts';
import { explain } from '../client/call.ts';
import type { Clients } from '../client/connection.ts';
import { condition } from '../objects.ts';

export function formatWatchEvent(e: WatchEvent__Output, now = new Date()): string | undefined {
  const time = now.toISOString().slice(11, 19);
  if (e.type === 'SYNCED') return `${time}  --- current state above; changes follow ---`;
  if (e.pool) {
    const p = e.pool;
    const s = p.status;
    if (e.type === 'DELETED') return `${time}  DELETED   pool/${p.name}`;
    return `${time}  ${e.type.padEnd(9)} pool/${p.name}  config=${s?.configuration || '<none>'} updated=${s?.updatedMachineCount ?? 0}/${s?.machineCount ?? 0} ` +
      `ready=${s?.readyMachineCount ?? 0} unavailable=${s?.unavailableMachineCount ?? 0} degraded=${s?.degradedMachineCount ?? 0} ` +
      `Updated=${condition(p, 'Updated')} Updating=${condition(p, 'Updating')} Degraded=${condition(p, 'Degraded')}${p.paused ? ' (paused)' : ''}`;
  }
  if (e.node) {
    const n = e.node;
    const s = n.status;
    if (e.type === 'DELETED') return `${time}  DELETED   node/${n.name}`;
    return `${time}  ${e.type.padEnd(9)} node/${n.name}  pool=${n.pool || '<none>'} state=${s?.state ?? ''} phase=${s?.phase || '-'} ` +
      `current=${s?.currentConfig || '<none>'} desired=${s?.desiredConfig || '<none>'}${s?.connected ? '' : ' (disconnected)'}${s?.reason ? ` reason="${s.reason}"` : ''}`;
  }
  return undefined;
}

export function watchCommand(c: Clients, write: (text: string) => void, options: { pools: boolean; nodes: boolean }): Promise<void> {
  return new Promise((resolve, reject) => {
    // Fail fast with the usual explanation when the server cannot be reached at all.
    c.status.waitForReady(new Date(Date.now() + c.timeoutMs), (err) => {
      if (err) {
        reject(explain({ code: Status.UNAVAILABLE, details: err.message, metadata: undefined } as unknown as ServiceError, c.server, c.timeoutMs, 'watch'));
        return;
      }
      const stream = c.status.watch({ pools: options.pools, nodes: options.nodes });
      stream.on('data', (e: WatchEvent__Output) => {
        const line = formatWatchEvent(e);
        if (line) write(line + '\n');
      });
      stream.on('error', (e: ServiceError) => {
        if (e.code === Status.CANCELLED) resolve();
        else reject(explain(e, c.server, c.timeoutMs, 'watch'));
      });
      stream.on('end', resolve);
      process.once('SIGINT', () => stream.cancel());
    });
  });
}
