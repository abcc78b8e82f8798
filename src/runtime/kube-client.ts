// The one module that talks to @kubernetes/client-node, shared by mcplane-server and `mcctl
// import` (the control plane reaches it as controlplane/kubernetes/kube-client.ts). It loads
// credentials (a kubeconfig file, or the pod's service account when mcplane-server runs in the
// cluster) and hands its caller a small KubernetesAccess: the typed API clients mcplane uses,
// a watch, and the helpers to read the apiserver's Status out of a failed call. Everything
// else goes through that object, so the client library stays behind one seam.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  PolicyV1Api,
  Watch,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { ConfigurationError } from '../machineconfig/index.ts';

export type { CoreV1Event, V1Node, V1Pod, V1PodDisruptionBudget, V1Eviction } from '@kubernetes/client-node';

/** Where the in-cluster service account's files are, as the kubelet mounts them. */
export const SERVICE_ACCOUNT_DIR = 'var/run/secrets/kubernetes.io/serviceaccount';

export interface KubernetesAccess {
  /** The API server's URL, for logs and messages. */
  readonly server: string;
  /** Where the credentials came from: `kubeconfig /path` or `in-cluster service account`. */
  readonly credentials: string;
  /** The namespace of the kubeconfig's context or of the service account (events land there). */
  readonly namespace: string;
  readonly core: CoreV1Api;
  readonly policy: PolicyV1Api;
  readonly custom: CustomObjectsApi;
  /**
   * Starts a watch on a collection path (`/api/v1/nodes`, `/apis/GROUP/VERSION/PLURAL`) from
   * `resourceVersion`; `onEvent` gets ADDED/MODIFIED/DELETED/ERROR and the object, `onEnd` the
   * reason it stopped (null: the server ended it). Returns a function that stops it.
   */
  watch(path: string, query: Record<string, string>, onEvent: (type: string, object: any) => void, onEnd: (err: unknown) => void): Promise<() => void>;
}

/** Request options that set the patch's content type (client-node's default is JSON patch). */
export const patchAs = {
  merge: setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  strategic: setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
  json: setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
};

export interface KubernetesCredentials {
  /** A kubeconfig file (--kubeconfig). */
  kubeconfig?: string;
  /**
   * In-cluster credentials: the environment to read KUBERNETES_SERVICE_HOST/PORT from and the
   * root under which the service account directory is (tests point it at a temp dir).
   */
  inCluster?: { env: NodeJS.ProcessEnv; root?: string };
  /**
   * client-node ends a watch that receives nothing for this long (its default: 30 s); the
   * informers then resume it. Tests shorten it.
   */
  watchIdleTimeoutMs?: number;
}

/** In-cluster credentials exist: the service host is set and the token is mounted. */
export function inClusterAvailable(env: NodeJS.ProcessEnv, root = '/'): boolean {
  return Boolean(env.KUBERNETES_SERVICE_HOST) && existsSync(join(root, SERVICE_ACCOUNT_DIR, 'token'));
}

export function loadKubernetesAccess(credentials: KubernetesCredentials): KubernetesAccess {
  const kc = new KubeConfig();
  let from: string;
  let namespace = 'default';
  if (credentials.kubeconfig) {
    from = `kubeconfig ${credentials.kubeconfig}`;
    try {
      // loadFromFile: relative certificate paths in the file are read from beside it.
      kc.loadFromFile(credentials.kubeconfig);
    } catch (err) {
      throw new ConfigurationError(`--kubeconfig ${credentials.kubeconfig}: ${(err as Error).message}`);
    }
    const context = kc.getContextObject(kc.getCurrentContext());
    if (!kc.getCurrentCluster()) {
      throw new ConfigurationError(`--kubeconfig ${credentials.kubeconfig}: no current context with a cluster (current-context: ${JSON.stringify(kc.getCurrentContext() ?? '')}); set current-context to one of: ${kc.getContexts().map((c) => c.name).join(', ') || 'none defined'}`);
    }
    if (context?.namespace) namespace = context.namespace;
  } else if (credentials.inCluster) {
    const { env, root = '/' } = credentials.inCluster;
    const dir = join(root, SERVICE_ACCOUNT_DIR);
    if (!env.KUBERNETES_SERVICE_HOST || !env.KUBERNETES_SERVICE_PORT) {
      throw new ConfigurationError('in-cluster Kubernetes credentials need KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (set in every pod); outside a cluster give --kubeconfig FILE');
    }
    for (const file of ['token', 'ca.crt']) {
      if (!existsSync(join(dir, file))) throw new ConfigurationError(`in-cluster Kubernetes credentials: ${join(dir, file)} is missing (is a service account token mounted in this pod?)`);
    }
    // client-node reads KUBERNETES_SERVICE_HOST/PORT from process.env; pass ours through it.
    const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
    process.env.KUBERNETES_SERVICE_HOST = env.KUBERNETES_SERVICE_HOST;
    process.env.KUBERNETES_SERVICE_PORT = env.KUBERNETES_SERVICE_PORT;
    try {
      kc.loadFromCluster(root === '/' ? '' : root.replace(/\/$/, ''));
    } finally {
      restoreEnv('KUBERNETES_SERVICE_HOST', saved.host);
      restoreEnv('KUBERNETES_SERVICE_PORT', saved.port);
    }
    from = 'in-cluster service account';
    if (existsSync(join(dir, 'namespace'))) namespace = readFileSync(join(dir, 'namespace'), 'utf8').trim() || namespace;
  } else {
    throw new ConfigurationError('no Kubernetes credentials: give --kubeconfig FILE, or run in a pod with a service account');
  }
  const watcher = new Watch(kc);
  // A private field in client-node's types, read on every watch; there is no setter.
  if (credentials.watchIdleTimeoutMs) (watcher as unknown as { requestTimeoutMs: number }).requestTimeoutMs = credentials.watchIdleTimeoutMs;
  return {
    server: kc.getCurrentCluster()!.server,
    credentials: from,
    namespace,
    core: kc.makeApiClient(CoreV1Api),
    policy: kc.makeApiClient(PolicyV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
    async watch(path, query, onEvent, onEnd) {
      const controller = await watcher.watch(path, query, (type, object) => onEvent(type, object), onEnd);
      return () => controller.abort();
    },
  };
}

function restoreEnv(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}

/** A watch that ended because nothing came for a while (client-node's idle timeout), not a failure. */
export function isIdleTimeout(err: unknown): boolean {
  return (err as { name?: string } | null)?.name === 'TimeoutError';
}

/** The apiserver's answer to a failed call: HTTP code, and its Status when it sent one. */
export interface KubeFailure {
  code: number;
  reason: string;
  message: string;
  causes: { reason?: string; message?: string; field?: string }[];
}

/**
 * Reads a failed call: client-node throws ApiException with the HTTP code and the body as
 * text (a meta/v1 Status); anything else (a refused connection, a TLS failure) has code 0.
 */
export function kubeFailureOf(err: unknown): KubeFailure {
  if (err instanceof ApiException) {
    let status: any;
    try {
      status = typeof err.body === 'string' ? JSON.parse(err.body) : err.body;
    } catch {
      status = undefined;
    }
    return {
      code: err.code,
      reason: status?.reason ?? '',
      message: status?.message ?? (typeof err.body === 'string' && err.body ? err.body : `HTTP ${err.code}`),
      causes: Array.isArray(status?.details?.causes) ? status.details.causes : [],
    };
  }
  const e = err as { message?: string; cause?: { message?: string; code?: string } };
  const cause = e?.cause?.code ?? e?.cause?.message;
  return { code: 0, reason: '', message: `${e?.message ?? String(err)}${cause ? ` (${cause})` : ''}`, causes: [] };
}
