// Connects to a Kubernetes API server with @kubernetes/client-node: the part of kube-client.ts
// that needs the library, imported by it only when credentials are loaded (see there why).

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  PolicyV1Api,
  Watch,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { ConfigurationError } from '../machineconfig/index.ts';
import type { KubernetesAccess, KubernetesCredentials } from './kube-client.ts';

export { ApiException } from '@kubernetes/client-node';

/** Request options that set the patch's content type (client-node's default is JSON patch). */
const patchAs = {
  merge: setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  strategic: setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
  json: setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
};

/** `serviceAccountDir`: kube-client's SERVICE_ACCOUNT_DIR (passed in: this module imports only its types). */
export function connectKubernetes(credentials: KubernetesCredentials, serviceAccountDir: string): KubernetesAccess {
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
    const dir = join(root, serviceAccountDir);
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
    patchAs,
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
