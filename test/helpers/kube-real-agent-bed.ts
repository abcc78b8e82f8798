// The set-up the Kubernetes tests with a real agent share: the Kubernetes API stand-in with two
// worker Nodes (host-a, host-b) and the pods the test puts on host-a, the real server draining
// through it, and a sandboxed host-a (real systemd user manager, the rpm-ostree and reboot
// stand-ins) not started yet: the test applies its configs first. close() stops all three.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startKubeApiStandIn, type KubeApiStandIn } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';
import { SandboxHost } from '../../sandbox/sandbox-host.ts';
import { addNode, addPod } from './kube-workloads.ts';
import { startTestServer, type TestServer } from './test-server.ts';

export interface KubeRealAgentBed {
  standIn: KubeApiStandIn;
  server: TestServer;
  /** host-a's sandbox, not started. */
  host: SandboxHost;
  close(): Promise<void>;
}

export async function startKubeRealAgentBed(o: {
  /** The temporary directory's prefix (the kubeconfig's). */
  tmpPrefix: string;
  /** Pods on host-a. */
  pods: Omit<Parameters<typeof addPod>[1], 'node'>[];
  /** Further cluster objects (a PodDisruptionBudget, say), added before the server starts. */
  objects?: Parameters<KubeApiStandIn['add']>[0][];
  drain: NonNullable<Parameters<typeof startTestServer>[0]>['drain'];
  /** host-a's agent.yaml settings beyond the sandbox's (a CRI socket, say). */
  hostConfig?: Record<string, unknown>;
}): Promise<KubeRealAgentBed> {
  const standIn = await startKubeApiStandIn({ timeScale: 0.01 });
  addNode(standIn, 'host-a', { 'node-role.kubernetes.io/worker': '' });
  addNode(standIn, 'host-b', { 'node-role.kubernetes.io/worker': '' });
  for (const pod of o.pods) addPod(standIn, { ...pod, node: 'host-a' });
  for (const object of o.objects ?? []) standIn.add(object);
  const kubeconfig = standIn.writeKubeconfig(mkdtempSync(join(tmpdir(), o.tmpPrefix)));
  let server: TestServer;
  try {
    server = await startTestServer({ kubernetes: { kubeconfig }, drain: o.drain });
  } catch (err) {
    await standIn.close();
    throw err;
  }
  const host = new SandboxHost({ name: 'host-a', server: server.address, pki: server.pki, ...(o.hostConfig ? { config: o.hostConfig } : {}) });
  return {
    standIn, server, host,
    close: async () => {
      await host.stop();
      await server.close();
      await standIn.close();
    },
  };
}
