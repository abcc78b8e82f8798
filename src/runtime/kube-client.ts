// The one seam to @kubernetes/client-node, shared by mcplane-server and `mcctl import` (the
// control plane reaches it as controlplane/kubernetes/kube-client.ts). It hands its caller a small
// KubernetesAccess: the typed API clients mcplane uses, a watch, and the helpers to read the
// apiserver's Status out of a failed call. Everything else goes through that object, so the client
// library stays behind one seam.
//
// The library itself is loaded only when credentials are (loadKubernetesAccess, from
// kube-connect.ts): it is 868 modules, about a second of CPU to load from node_modules and 2.4 s
// through tsx, which every process that imports the control plane paid at start whether or not
// it talks to a cluster (a server without --kubeconfig, and every test file that starts one).

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { CoreV1Api, CustomObjectsApi, PolicyV1Api, ConfigurationOptions } from '@kubernetes/client-node';

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
  /** Request options that set a patch's content type (client-node's default is JSON patch). */
  readonly patchAs: { readonly merge: ConfigurationOptions; readonly strategic: ConfigurationOptions; readonly json: ConfigurationOptions };
  /**
   * Starts a watch on a collection path (`/api/v1/nodes`, `/apis/GROUP/VERSION/PLURAL`) from
   * `resourceVersion`; `onEvent` gets ADDED/MODIFIED/DELETED/ERROR and the object, `onEnd` the
   * reason it stopped (null: the server ended it). Returns a function that stops it.
   */
  watch(path: string, query: Record<string, string>, onEvent: (type: string, object: any) => void, onEnd: (err: unknown) => void): Promise<() => void>;
}

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

/**
 * Loads the client library (once per process) and the credentials; bad credentials are refused
 * with a ConfigurationError naming the file or the missing setting.
 */
export async function loadKubernetesAccess(credentials: KubernetesCredentials): Promise<KubernetesAccess> {
  const library = await import('./kube-connect.ts');
  apiException = library.ApiException;
  return library.connectKubernetes(credentials, SERVICE_ACCOUNT_DIR);
}

/**
 * client-node's ApiException, once the library is loaded: a failure can only be one after a
 * KubernetesAccess was made, which loads it.
 */
let apiException: (abstract new (...args: never[]) => Error) | undefined;

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
  if (apiException !== undefined && err instanceof apiException) {
    const api = err as Error & { code: number; body: unknown };
    let status: any;
    try {
      status = typeof api.body === 'string' ? JSON.parse(api.body) : api.body;
    } catch {
      status = undefined;
    }
    return {
      code: api.code,
      reason: status?.reason ?? '',
      message: status?.message ?? (typeof api.body === 'string' && api.body ? api.body : `HTTP ${api.code}`),
      causes: Array.isArray(status?.details?.causes) ? status.details.causes : [],
    };
  }
  const e = err as { message?: string; cause?: { message?: string; code?: string } };
  const cause = e?.cause?.code ?? e?.cause?.message;
  return { code: 0, reason: '', message: `${e?.message ?? String(err)}${cause ? ` (${cause})` : ''}`, causes: [] };
}
