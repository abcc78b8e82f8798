// `mcctl get events`: kubectl's columns (LAST SEEN, TYPE, REASON, OBJECT, MESSAGE) and its Event
// object for -o yaml|json, filtered by --node and --pool on the server.

import { NotFoundError } from '../machineconfig/errors.ts';
import type { Event__Output } from '../runtime/generated/mcplane/v1/Event.ts';
import { call } from './client/call.ts';
import type { Clients } from './client/connection.ts';
import { age } from './format.ts';
import type { Resource } from './resources.ts';

const iso = (ms: number): string | null => (ms ? new Date(ms).toISOString() : null);

const KINDS: Record<string, string> = { node: 'Node', pool: 'MachineConfigPool' };

export function eventObject(e: Event__Output): Record<string, unknown> {
  const slash = e.object.indexOf('/');
  const kind = e.object.slice(0, slash);
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: e.name },
    type: e.type,
    reason: e.reason,
    involvedObject: { kind: KINDS[kind] ?? kind, name: e.object.slice(slash + 1) },
    message: e.message,
    count: e.count,
    firstTimestamp: iso(e.firstTimestampUnixMs),
    lastTimestamp: iso(e.lastTimestampUnixMs),
    source: { component: 'mcplane' },
    ...(e.pool ? { pool: e.pool } : {}),
  };
}

/** kubectl's LAST SEEN: the age, and "(xN over AGE)" for a repeated event. */
export function lastSeen(e: Event__Output, now = Date.now()): string {
  const last = age(e.lastTimestampUnixMs, now);
  return e.count > 1 ? `${last} (x${e.count} over ${age(e.firstTimestampUnixMs, now)})` : last;
}

export const events: Resource<Event__Output> = {
  name: 'events',
  typeName: 'event',
  list: async (c: Clients, f) => (await call(c, c.status.listEvents.bind(c.status), { node: f.node ?? '', pool: f.pool ?? '', limit: 0 }, 'list events')).events,
  get: async (c, name) => {
    const found = (await call(c, c.status.listEvents.bind(c.status), { node: '', pool: '', limit: 0 }, 'list events')).events.find((e) => e.name === name);
    if (!found) throw new NotFoundError('Event', name);
    return found;
  },
  nameOf: (e) => e.name,
  object: eventObject,
  labels: () => undefined,
  columns: ['LAST SEEN', 'TYPE', 'REASON', 'OBJECT', 'MESSAGE'],
  wideColumns: ['FIRST SEEN', 'COUNT', 'NAME'],
  row: (e, wide) => {
    const row: (string | number)[] = [lastSeen(e), e.type, e.reason, e.object, e.message];
    if (wide) row.push(age(e.firstTimestampUnixMs), e.count, e.name);
    return row;
  },
  watch: 'event',
};
