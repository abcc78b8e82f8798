// ?watch=1 on a collection: newline-delimited JSON events ({"type":"ADDED|MODIFIED|DELETED",
// "object":...}) on a 200 response that stays open. Without a resourceVersion (or with "0")
// the stream starts with an ADDED for every current object, as the apiserver's "get state and
// start at most recent" does; with one it replays the history after it. A resourceVersion
// older than the compacted history gets a single ERROR event carrying a 410 Expired Status
// and the stream ends: the client must list again, exactly what the real server does.
// A change that moves an object out of (or into) a selection is sent as DELETED (or ADDED).

import type { ServerResponse } from 'node:http';
import { StatusError } from './api-status.ts';
import type { KubeObject, ObjectStore, StoredChange } from './object-store.ts';
import type { ResourceRoute } from './request-routing.ts';
import { selectionOf } from './resource-verbs.ts';

export function serveWatch(store: ObjectStore, route: ResourceRoute, query: URLSearchParams, res: ServerResponse, onEnd: () => void): void {
  const match = selectionOf(route, query);
  const from = query.get('resourceVersion');
  res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
  // The apiserver answers a watch at once; clients wait for these headers before reading.
  res.flushHeaders();
  const send = (type: string, object: unknown): void => {
    // Ended from the server side (closeWatches, timeoutSeconds): 'close' unsubscribes shortly.
    if (res.writableEnded || res.destroyed) return;
    res.write(`${JSON.stringify({ type, object })}\n`);
  };
  const deliver = (change: StoredChange): void => {
    if (change.resource !== route.resource) return;
    const now = match(change.object);
    const before = change.previous ? match(change.previous) : false;
    if (change.type === 'MODIFIED') {
      if (now && before) send('MODIFIED', change.object);
      else if (now) send('ADDED', change.object);
      else if (before) send('DELETED', change.object);
    } else if (now) {
      send(change.type, change.object);
    }
  };
  let replay: StoredChange[] | KubeObject[];
  try {
    replay = !from || from === '0' ? store.list(route.resource, route.namespace).filter(match) : store.changesSince(Number(from));
  } catch (err) {
    if (!(err instanceof StatusError)) throw err;
    send('ERROR', err.status);
    res.end();
    onEnd();
    return;
  }
  for (const item of replay) {
    if ('resourceVersion' in item && 'resource' in item) deliver(item as StoredChange);
    else send('ADDED', item);
  }
  const unsubscribe = store.subscribe(deliver);
  const timeout = Number(query.get('timeoutSeconds') ?? 0);
  const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined;
  timer?.unref();
  res.on('close', () => {
    unsubscribe();
    if (timer) clearTimeout(timer);
    onEnd();
  });
}
