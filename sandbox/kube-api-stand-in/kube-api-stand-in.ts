// A STAND-IN for the Kubernetes API server (no real apiserver can run on the build machines).
// It follows the documented API for exactly what mcplane uses: nodes, pods, events,
// poddisruptionbudgets with the eviction subresource, and MCO's machineconfigs and
// machineconfigpools CRDs; get, list, watch, create, update, patch, delete and the status
// subresource; bearer-token auth over HTTPS on 127.0.0.1, port 0. It also plays the two
// controllers whose effects mcplane depends on: the disruption controller (PDB status) and the
// kubelet's side of graceful pod deletion. The test-side API (add, get, markPodReady, compact,
// requests...) is how a test sets the cluster up and checks what mcplane asked for.

import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createCertificateAuthority, issueCertificate } from '../../src/runtime/pki.ts';
import { apiErrors, StatusError } from './api-status.ts';
import { budgetStatus, budgetStatusObject } from './disruption-budgets.ts';
import { serveDiscovery } from './discovery.ts';
import { evictPod } from './eviction.ts';
import { GracefulDeletion } from './graceful-deletion.ts';
import { ObjectStore, type KubeObject } from './object-store.ts';
import { routeOf } from './request-routing.ts';
import { createObject, deleteObject, getObject, listObjects, patchObject, updateObject, type VerbContext } from './resource-verbs.ts';
import { OPTIONAL_RESOURCES, STAND_IN_RESOURCES, apiVersionOf, type ResourceType } from './resource-table.ts';
import { serveWatch } from './watch-stream.ts';

export interface KubeApiStandInOptions {
  /** Multiplies every grace period (pod deletion) so tests stay fast; default 0.01. */
  timeScale?: number;
  /** mcplane's bearer token (user `mcplane`); a random one by default. */
  token?: string;
  /**
   * How long the server takes to answer a request, in milliseconds, before it handles it: a real
   * API server under load (or an admission webhook on evictions) answers in seconds, and a
   * controller must not stall everything else while it waits. Default: at once.
   */
  latencyMs?: (request: { method: string; path: string }) => number;
  /** Serve MCO's MachineConfigNode CRD (OpenShift 4.19+); without it the resource is 404, as on an older cluster. */
  machineConfigNodeCrd?: boolean;
}

/** One request as RBAC sees it: verb, API group, resource, subresource, namespace, name. */
export interface StandInRequest {
  method: string;
  path: string;
  verb: 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'discovery' | 'unknown';
  apiGroup?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  code: number;
  authenticated: boolean;
  /**
   * Who called: `mcplane` (its token: the calls the RBAC manifest must allow), `admin` (the
   * test acting as a cluster administrator, e.g. `oc apply`), or a user from addUser (one per
   * mcplane replica, to see which replica called).
   */
  user?: string;
}

/** Any object with apiVersion, kind and metadata: a plain one or @kubernetes/client-node's model classes. */
export type AnyObject = { apiVersion?: string; kind?: string; metadata?: object };

export interface KubeApiStandIn {
  url: string;
  port: number;
  token: string;
  /** A second user's token, for the test's own calls as a cluster administrator. */
  adminToken: string;
  caPem: string;
  /** Every request answered so far, in order. */
  requests: StandInRequest[];
  /** Writes a kubeconfig for this stand-in (token auth, its CA) and returns its path. */
  writeKubeconfig(dir: string, name?: string, user?: string): string;
  /** Test side: another user with a token of its own (e.g. one per mcplane replica); returns the token. */
  addUser(name: string): string;
  /** Writes the in-cluster service account files under `root` as loadFromCluster(root) reads them. */
  writeServiceAccount(root: string, namespace?: string): void;
  /** Test side: stores an object as given (status included), bypassing the API's rules. */
  add<T extends AnyObject>(object: T): KubeObject;
  /** Test side: replaces an object as given (status included). */
  put<T extends AnyObject>(object: T): KubeObject;
  get(kind: string, name: string, namespace?: string): KubeObject | undefined;
  list(kind: string, namespace?: string): KubeObject[];
  remove(kind: string, name: string, namespace?: string): void;
  /** Test side: the kubelet reports the pod Ready (or not) and Running. */
  markPodReady(namespace: string, name: string, ready?: boolean): KubeObject;
  /** Drops the watch history, as etcd's compaction does: older resourceVersions get 410. */
  compact(): number;
  /** Ends every open watch from the server side (clients must resume). */
  closeWatches(): void;
  /** Ends every open watch with an ERROR event carrying this failure (e.g. a 500 mid-stream). */
  failWatches(code: number, reason: string, message: string): void;
  resourceVersion(): number;
  close(): Promise<void>;
}

function resourceOfKind(kind: string): ResourceType {
  const r = STAND_IN_RESOURCES.find((x) => x.kind === kind);
  if (!r) throw new Error(`the Kubernetes API stand-in serves no kind ${kind}`);
  return r;
}

const VERBS: Record<string, StandInRequest['verb']> = { GET: 'get', POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' };

export async function startKubeApiStandIn(options: KubeApiStandInOptions = {}): Promise<KubeApiStandIn> {
  const ca = await createCertificateAuthority('kube-api stand-in CA');
  const serving = await issueCertificate(ca, { commonName: 'kube-apiserver-stand-in', hosts: ['127.0.0.1', 'localhost'], usage: 'server' });
  const token = options.token ?? randomBytes(16).toString('hex');
  const adminToken = randomBytes(16).toString('hex');
  const users = new Map<string, string>([[token, 'mcplane'], [adminToken, 'admin']]);
  const store = new ObjectStore();
  const pods = resourceOfKind('Pod');
  const budgets = resourceOfKind('PodDisruptionBudget');
  const deletion = new GracefulDeletion(store, pods, options.timeScale ?? 0.01);
  const ctx: VerbContext = { store, deletion };
  const requests: StandInRequest[] = [];
  const watches = new Set<ServerResponse>();

  // The disruption controller's part: each budget's status follows its pods.
  let budgetSyncQueued = false;
  store.subscribe((change) => {
    if ((change.resource !== pods && change.resource !== budgets) || budgetSyncQueued) return;
    budgetSyncQueued = true;
    queueMicrotask(() => {
      budgetSyncQueued = false;
      const allPods = store.list(pods);
      for (const pdb of store.list(budgets)) {
        const status = budgetStatusObject(pdb, budgetStatus(pdb, allPods), pdb.status);
        const { conditions: _c, ...counts } = status;
        const { conditions: _o, ...oldCounts } = pdb.status ?? {};
        if (JSON.stringify(counts) !== JSON.stringify(oldCounts) || !pdb.status?.conditions) store.update(budgets, { ...pdb, status });
      }
    });
  });

  const handle = async (req: IncomingMessage, res: ServerResponse, entry: StandInRequest): Promise<void> => {
    const url = new URL(req.url ?? '/', 'https://stand-in');
    const header = req.headers.authorization ?? '';
    const user = header.startsWith('Bearer ') ? users.get(header.slice('Bearer '.length)) : undefined;
    if (user) entry.user = user;
    entry.authenticated = user !== undefined;
    if (!entry.authenticated) throw apiErrors.unauthorized();
    const routed = routeOf(url.pathname);
    if (routed.kind === 'discovery') {
      entry.verb = 'discovery';
      if (req.method !== 'GET') throw apiErrors.methodNotAllowed(req.method ?? '');
      return reply(res, 200, serveDiscovery(routed.root, routed.group, routed.version));
    }
    const route = routed.route;
    Object.assign(entry, {
      apiGroup: route.resource.group, resource: route.resource.plural,
      ...(route.subresource ? { subresource: route.subresource } : {}),
      ...(route.namespace !== undefined ? { namespace: route.namespace } : {}),
      ...(route.name !== undefined ? { name: route.name } : {}),
    });
    // The request is logged as the resource it names (RBAC checks it as such), then refused.
    if (OPTIONAL_RESOURCES.includes(route.resource.plural) && !(route.resource.plural === 'machineconfignodes' && options.machineConfigNodeCrd)) {
      if (req.method === 'GET' && route.name === undefined) entry.verb = url.searchParams.get('watch') ? 'watch' : 'list';
      throw apiErrors.pathNotFound(url.pathname);
    }
    const query = url.searchParams;
    const body = ['POST', 'PUT', 'PATCH', 'DELETE'].includes(req.method ?? '') ? await readJson(req) : undefined;
    switch (req.method) {
      case 'GET':
        if (route.name === undefined) {
          const watch = query.get('watch');
          if (watch === '1' || watch === 'true') {
            entry.verb = 'watch';
            watches.add(res);
            return serveWatch(store, route, query, res, () => watches.delete(res));
          }
          entry.verb = 'list';
          return reply(res, 200, listObjects(ctx, route, query));
        }
        return reply(res, 200, getObject(ctx, route));
      case 'POST':
        if (route.subresource === 'eviction') return reply(res, 201, evictPod({ store, pods, budgets, deletion }, route.namespace!, route.name!, body as Record<string, any>));
        if (route.name !== undefined) throw apiErrors.methodNotAllowed('POST');
        return reply(res, 201, createObject(ctx, route, body as Record<string, any>));
      case 'PUT':
        if (route.name === undefined || route.subresource === 'eviction') throw apiErrors.methodNotAllowed('PUT');
        return reply(res, 200, updateObject(ctx, route, body as Record<string, any>));
      case 'PATCH':
        if (route.name === undefined || route.subresource === 'eviction') throw apiErrors.methodNotAllowed('PATCH');
        return reply(res, 200, patchObject(ctx, route, req.headers['content-type'] ?? '', body as never));
      case 'DELETE':
        if (route.name === undefined || route.subresource) throw apiErrors.methodNotAllowed('DELETE');
        return reply(res, 200, deleteObject(ctx, route, query, body as Record<string, any> | undefined));
      default:
        throw apiErrors.methodNotAllowed(req.method ?? '');
    }
  };

  const server: Server = createServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => {
    const entry: StandInRequest = { method: req.method ?? '', path: req.url ?? '', verb: VERBS[req.method ?? ''] ?? 'unknown', code: 0, authenticated: false };
    res.on('finish', () => { entry.code = res.statusCode; });
    res.on('close', () => { if (!entry.code) entry.code = res.statusCode; });
    requests.push(entry);
    const latency = options.latencyMs?.({ method: entry.method, path: entry.path }) ?? 0;
    const handled = latency > 0 ? new Promise((resolve) => setTimeout(resolve, latency)).then(() => handle(req, res, entry)) : handle(req, res, entry);
    handled.catch((err: unknown) => {
      const status = err instanceof StatusError ? err.status : apiErrors.internal(`stand-in: ${(err as Error).message}`).status;
      if (!res.headersSent) reply(res, status.code, status);
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `https://127.0.0.1:${port}`;

  return {
    url,
    port,
    token,
    adminToken,
    caPem: ca.certPem,
    requests,
    writeKubeconfig(dir, name = 'kubeconfig', user = 'mcplane') {
      mkdirSync(dir, { recursive: true });
      const path = join(dir, name);
      const config = {
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'stand-in', cluster: { server: url, 'certificate-authority-data': Buffer.from(ca.certPem).toString('base64') } }],
        users: [{ name: user, user: { token: [...users].find(([, u]) => u === user)?.[0] ?? token } }],
        contexts: [{ name: 'stand-in', context: { cluster: 'stand-in', user, namespace: 'default' } }],
        'current-context': 'stand-in',
      };
      writeFileSync(path, JSON.stringify(config, null, 2), { mode: 0o600 });
      return path;
    },
    addUser(name) {
      const t = randomBytes(16).toString('hex');
      users.set(t, name);
      return t;
    },
    writeServiceAccount(root, namespace = 'mcplane') {
      const dir = join(root, 'var/run/secrets/kubernetes.io/serviceaccount');
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'ca.crt'), ca.certPem);
      writeFileSync(join(dir, 'token'), token);
      writeFileSync(join(dir, 'namespace'), namespace);
    },
    add(object) {
      return store.create(resourceFor(object as KubeObject), object as KubeObject);
    },
    put(object) {
      return store.update(resourceFor(object as KubeObject), object as KubeObject);
    },
    get: (kind, name, namespace) => store.get(resourceOfKind(kind), namespace, name),
    list: (kind, namespace) => store.list(resourceOfKind(kind), namespace),
    remove(kind, name, namespace) {
      store.remove(resourceOfKind(kind), namespace, name);
    },
    markPodReady(namespace, name, ready = true) {
      const pod = store.get(pods, namespace, name);
      if (!pod) throw new Error(`stand-in: no pod ${namespace}/${name}`);
      const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      const conditions = (pod.status?.conditions ?? []).filter((c: { type: string }) => c.type !== 'Ready');
      conditions.push({ type: 'Ready', status: ready ? 'True' : 'False', lastTransitionTime: now });
      return store.update(pods, { ...pod, status: { ...(pod.status ?? {}), phase: 'Running', conditions } });
    },
    compact: () => store.compact(),
    closeWatches() {
      for (const res of watches) res.end();
    },
    failWatches(code, reason, message) {
      const status = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
      for (const res of watches) {
        if (!res.writableEnded) res.end(`${JSON.stringify({ type: 'ERROR', object: status })}\n`);
      }
    },
    resourceVersion: () => store.resourceVersion(),
    async close() {
      deletion.close();
      for (const res of watches) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function resourceFor(object: KubeObject): ResourceType {
  const r = STAND_IN_RESOURCES.find((x) => x.kind === object.kind && (object.apiVersion === undefined || apiVersionOf(x) === object.apiVersion));
  if (!r) throw new Error(`the Kubernetes API stand-in serves no ${object.apiVersion}/${object.kind}`);
  return r;
}

function reply(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if (!text.trim()) return undefined;
  try {
    return JSON.parse(text);
  } catch (err) {
    throw apiErrors.badRequest(`the request body is not JSON: ${(err as Error).message}`);
  }
}
