// The cluster side of drain tests, on the Kubernetes API stand-in: Nodes, DaemonSet and mirror
// pods, and a small stand-in for a Deployment's controller (the stand-in server has none): when
// one of an app's pods is deleted it creates a replacement on a schedulable node (not cordoned),
// and marks it Ready once the test lets replacements become ready. That is what frees a
// PodDisruptionBudget in a real cluster.

import type { KubeApiStandIn } from '../../sandbox/kube-api-stand-in/kube-api-stand-in.ts';

export interface KubeObjectLike {
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string>; deletionTimestamp?: string; ownerReferences?: { kind: string; controller?: boolean }[]; creationTimestamp?: string };
  spec?: Record<string, any>;
  status?: Record<string, any>;
}

export function addNode(standIn: KubeApiStandIn, name: string, labels: Record<string, string>, createdAt?: Date): void {
  standIn.add({
    apiVersion: 'v1', kind: 'Node',
    metadata: { name, labels: { 'kubernetes.io/hostname': name, ...labels }, ...(createdAt ? { creationTimestamp: createdAt.toISOString().replace(/\.\d+Z$/, 'Z') } : {}) },
    spec: {},
  } as never);
}

export function addPod(standIn: KubeApiStandIn, pod: { namespace: string; name: string; node: string; labels?: Record<string, string>; graceSeconds?: number; daemonSet?: boolean; mirror?: boolean; emptyDir?: boolean }): void {
  standIn.add({
    apiVersion: 'v1', kind: 'Pod',
    metadata: {
      name: pod.name, namespace: pod.namespace, labels: pod.labels ?? {},
      ...(pod.daemonSet ? { ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'node-agent', uid: 'ds-uid', controller: true }] } : {}),
      ...(pod.mirror ? { annotations: { 'kubernetes.io/config.mirror': 'abc123' } } : {}),
    },
    spec: {
      nodeName: pod.node,
      terminationGracePeriodSeconds: pod.graceSeconds ?? 30,
      containers: [{ name: 'main', image: 'registry.example/app:1' }],
      ...(pod.emptyDir ? { volumes: [{ name: 'scratch', emptyDir: {} }] } : {}),
    },
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
  } as never);
}

export function podsOn(standIn: KubeApiStandIn, node: string): KubeObjectLike[] {
  return (standIn.list('Pod') as unknown as KubeObjectLike[]).filter((p) => p.spec?.nodeName === node);
}

/** Pods a drain must remove: not DaemonSet, not mirror. */
export function evictablePodsOn(standIn: KubeApiStandIn, node: string): KubeObjectLike[] {
  return podsOn(standIn, node).filter((p) => !p.metadata.annotations?.['kubernetes.io/config.mirror'] && !p.metadata.ownerReferences?.some((o) => o.kind === 'DaemonSet'));
}

/** A Deployment's replicas, kept up by the test: replacements go to schedulable nodes. */
export class Workload {
  /** Replacements become Ready only while this is true (the test decides when a budget frees). */
  readyAllowed = true;
  readonly replacements: { name: string; node: string; at: number }[] = [];
  #timer: NodeJS.Timeout;
  #next = 0;

  private readonly standIn: KubeApiStandIn;
  readonly namespace: string;
  readonly app: string;
  readonly replicas: number;
  private readonly nodes: string[];
  constructor(standIn: KubeApiStandIn, namespace: string, app: string, replicas: number, nodes: string[]) {
    this.standIn = standIn;
    this.namespace = namespace;
    this.app = app;
    this.replicas = replicas;
    this.nodes = nodes;
    this.#timer = setInterval(() => this.#sync(), 25);
  }

  pods(): KubeObjectLike[] {
    return (this.standIn.list('Pod', this.namespace) as unknown as KubeObjectLike[]).filter((p) => p.metadata.labels?.app === this.app);
  }

  #sync(): void {
    const live = this.pods().filter((p) => !p.metadata.deletionTimestamp);
    for (let i = live.length; i < this.replicas; i++) {
      const schedulable = this.nodes.filter((n) => this.standIn.get('Node', n) && !(this.standIn.get('Node', n) as unknown as KubeObjectLike).spec?.unschedulable);
      if (schedulable.length === 0) return;
      const counts = schedulable.map((n) => ({ n, c: live.filter((p) => p.spec?.nodeName === n).length }));
      const node = counts.sort((a, b) => a.c - b.c || a.n.localeCompare(b.n))[0]!.n;
      const name = `${this.app}-r${++this.#next}`;
      this.standIn.add({
        apiVersion: 'v1', kind: 'Pod',
        metadata: { name, namespace: this.namespace, labels: { app: this.app }, ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `${this.app}-rs`, uid: 'rs-uid', controller: true }] },
        spec: { nodeName: node, terminationGracePeriodSeconds: 30, containers: [{ name: 'main', image: 'registry.example/app:1' }] },
        status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'False' }] },
      } as never);
      this.replacements.push({ name, node, at: Date.now() });
      live.push({ metadata: { name }, spec: { nodeName: node } });
    }
    if (!this.readyAllowed) return;
    for (const p of live) {
      const pod = this.standIn.get('Pod', p.metadata.name, this.namespace) as unknown as KubeObjectLike | undefined;
      if (pod && !pod.metadata.deletionTimestamp && !pod.status?.conditions?.some((c: { type: string; status: string }) => c.type === 'Ready' && c.status === 'True')) {
        this.standIn.markPodReady(this.namespace, p.metadata.name);
      }
    }
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

/** A PodDisruptionBudget over the pods labelled app=`app` in `namespace`; `spec` is minAvailable or maxUnavailable. */
export function addBudget(standIn: KubeApiStandIn, namespace: string, name: string, app: string, spec: { minAvailable: number } | { maxUnavailable: number }): void {
  standIn.add({ apiVersion: 'policy/v1', kind: 'PodDisruptionBudget', metadata: { name, namespace }, spec: { ...spec, selector: { matchLabels: { app } } } } as never);
}
