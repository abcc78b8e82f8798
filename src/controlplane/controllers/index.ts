// The control plane's controllers, each in a lane of its own (controller-manager.ts). Adding a
// controller is its file and one line here. Every one of them is leader-only today: what they
// decide is written once, fenced by the leader record, and every replica acts on it from its cache.

import type { Logger } from '../../runtime/logger.ts';
import type { ClusterCache } from '../cache/cluster-cache.ts';
import type { NodeOperations } from '../kubernetes/node-operations.ts';
import type { KubernetesNodeSync } from '../kubernetes/kubernetes-node-sync.ts';
import type { ServerMetrics } from '../metrics/server-metrics.ts';
import type { Clock } from '../replica/clock.ts';
import type { LeaderWriter } from '../replica/leader-writer.ts';
import type { DrainAccess } from './drain-gate.ts';
import type { DrainController } from './drain-controller.ts';
import { EnrollmentTokenCollector } from './enrollment-token-collector.ts';
import { GeneratedConfigController } from './generated-config-controller.ts';
import type { EventRecorder } from './event-recorder.ts';
import type { KubernetesSourceController } from './kubernetes-source-controller.ts';
import { MachineConfigNodeController } from './machine-config-node-controller.ts';
import { NodeAnnotationController } from './node-annotation-controller.ts';
import { PoolMembershipController } from './pool-membership-controller.ts';
import { PoolStatusController } from './pool-status-controller.ts';
import type { KeyedController } from './reconciler.ts';
import { RenderController } from './render-controller.ts';
import { RolloutController } from './rollout-controller.ts';
import { wholePass } from './whole-pass.ts';

export interface ControllerDependencies {
  cache: ClusterCache;
  writer: LeaderWriter;
  clock: Clock;
  log: Logger;
  metrics: ServerMetrics;
  drainAccess: DrainAccess;
  /** Made by the control plane, which wires its events into history and metrics. */
  drains: DrainController;
  events: EventRecorder;
  /** With --kubernetes-source. */
  source: KubernetesSourceController | undefined;
  /** With a cluster. */
  kubernetes: { ops: NodeOperations; sync: KubernetesNodeSync } | undefined;
  tokenSweepMs: number;
}

export function createControllers(d: ControllerDependencies): KeyedController<string>[] {
  return [
    ...(d.source ? [wholePass(d.source)] : []),
    // The MachineConfigs MCO would generate from KubeletConfigs, ContainerRuntimeConfigs and the
    // registries sources (applied, or taken from the cluster); their writes key the render lane.
    wholePass(new GeneratedConfigController(d.cache, d.writer, d.log)),
    new RenderController(d.cache, d.writer, d.log, d.metrics, d.clock),
    // One pass over every node, its writes in batches of 100: 5,000 new hosts are 50 commits, not 5,000.
    wholePass(new PoolMembershipController(d.cache, d.writer, d.log)),
    new RolloutController(d.cache, d.writer, d.clock, d.log, d.drainAccess),
    new PoolStatusController(d.cache, d.writer, d.clock),
    wholePass(new EnrollmentTokenCollector(d.cache, d.writer, d.tokenSweepMs, d.log)),
    wholePass(d.events),
    d.drains,
    ...(d.kubernetes ? [wholePass(new NodeAnnotationController(d.cache, d.kubernetes.ops, d.kubernetes.sync, d.log))] : []),
    // MCO's MachineConfigNode objects in the cluster, when it has their CRD.
    ...(d.kubernetes ? [wholePass(new MachineConfigNodeController(d.cache, d.kubernetes.ops.access, d.log))] : []),
  ];
}
