// mcctl watch: the current state, then one line per change, until interrupted.

import type { WatchEvent__Output } from '../../runtime/generated/mcplane/v1/WatchEvent.ts';
import type { Clients } from '../client/connection.ts';
import { watchWithReconnect } from '../client/watch-stream.ts';
import { forDisplay } from '../format.ts';
import { condition } from '../objects.ts';
import type { Io } from './read.ts';

export function formatWatchEvent(event: WatchEvent__Output, now = new Date()): string | undefined {
  // What nodes report (reasons above all) shown with its control characters escaped (format.ts).
  const e = forDisplay(event);
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
  if (e.event) {
    const v = e.event;
    if (e.type === 'DELETED') return undefined; // an expired event is not news
    return `${time}  EVENT     ${v.object}  ${v.type} ${v.reason}: ${v.message}${v.count > 1 ? ` (x${v.count})` : ''}`;
  }
  return undefined;
}

export interface WatchCommandOptions {
  pools: boolean;
  nodes: boolean;
  /** Also print events (config rendered, node assigned, phase changed, ...). */
  events?: boolean;
  giveUpAfterMs: number;
}

/**
 * The current state, then one line per change. A lost connection (a server restart, a network
 * blip) is said on stderr and retried with backoff; after reconnecting, only what changed
 * meanwhile is printed. It ends with a non-zero exit and the reason when it cannot go on.
 */
export function watchCommand(c: Clients, io: Io, options: WatchCommandOptions): Promise<void> {
  // The last line printed per object, without its time: what a resync compares against.
  const last = new Map<string, string>();
  const keyOf = (e: WatchEvent__Output): string | undefined => (e.pool ? `pool/${e.pool.name}` : e.node ? `node/${e.node.name}` : e.event ? `event/${e.event.name}` : undefined);
  const print = (e: WatchEvent__Output): void => {
    const line = formatWatchEvent(e);
    const key = keyOf(e);
    if (!line || !key) return;
    const body = line.slice(10).replace(/^(ADDED|MODIFIED) +/, '');
    if (e.type === 'DELETED') last.delete(key);
    else if (last.get(key) === body) return;
    else last.set(key, body);
    io.out(line + '\n');
  };
  let synced = false;
  const handle = watchWithReconnect(c, {
    pools: options.pools,
    nodes: options.nodes,
    events: options.events ?? false,
    giveUpAfterMs: options.giveUpAfterMs,
    notice: io.err,
    onSnapshot(events) {
      if (!synced) {
        synced = true;
        for (const e of events) print(e);
        io.out(formatWatchEvent({ type: 'SYNCED' } as WatchEvent__Output) + '\n');
        return;
      }
      // A reconnect: report what changed while the stream was down, as changes.
      const present = new Set(events.map(keyOf));
      for (const key of [...last.keys()]) {
        if (present.has(key)) continue;
        const [kind, name] = key.split('/') as ['pool' | 'node', string];
        print({ type: 'DELETED', [kind]: { name } } as unknown as WatchEvent__Output);
      }
      for (const e of events) print({ ...e, type: last.has(keyOf(e)!) ? 'MODIFIED' : 'ADDED' });
    },
    onChange: print,
  });
  process.once('SIGINT', () => handle.stop());
  return handle.done;
}
