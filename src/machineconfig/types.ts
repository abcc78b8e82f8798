// The domain model. Shapes follow machineconfiguration.openshift.io/v1 so an OpenShift YAML maps
// one to one; mcplane's additions are marked as such.

import type { KernelType } from './constants.ts';

export type Labels = Record<string, string>;

export interface ObjectMeta {
  name: string;
  labels?: Labels;
  annotations?: Record<string, string>;
  /** Set by mcplane on the MachineConfigs it generates from a KubeletConfig, ContainerRuntimeConfig or the registries sources (never read from a manifest). */
  ownerReferences?: OwnerReference[];
}

/** Kubernetes' ownerReference, as MCO sets it on its generated MachineConfigs (uid left out: mcplane names objects uniquely by kind and name). */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

// ---- Ignition, internal 3.x form ----------------------------------------------------------------
// Every accepted Ignition version is converted to this one shape. File contents are always a
// base64 data URL with no compression, so the content hash and the agent never see two spellings
// of the same bytes.

export interface IgnitionFileOwner {
  id?: number;
  name?: string;
}

export interface IgnitionFile {
  path: string;
  mode: number;
  overwrite: true;
  contents: { source: string };
  user?: IgnitionFileOwner;
  group?: IgnitionFileOwner;
}

export interface IgnitionDropin {
  name: string;
  contents?: string;
}

export interface IgnitionUnit {
  name: string;
  enabled?: boolean;
  mask?: boolean;
  contents?: string;
  dropins?: IgnitionDropin[];
}

export interface IgnitionUser {
  name: 'core';
  sshAuthorizedKeys?: string[];
  passwordHash?: string;
}

/**
 * A directory or link Ignition creates at first boot: MCO's day-1 constructs. Served in the
 * first-boot Ignition; after that MCO refuses a change to directories, and to links unless all
 * are removed (pkg/controller/common/reconcile.go, isConfigReconcilable). Absent when empty, so
 * configs without them render (and hash) as before.
 */
export interface IgnitionDirectory {
  path: string;
  mode?: number;
  user?: IgnitionFileOwner;
  group?: IgnitionFileOwner;
  overwrite?: boolean;
}

export interface IgnitionLink {
  path: string;
  target: string;
  hard?: boolean;
  user?: IgnitionFileOwner;
  group?: IgnitionFileOwner;
  overwrite?: boolean;
}

export interface IgnitionConfig {
  ignition: { version: string };
  passwd: { users: IgnitionUser[] };
  storage: { files: IgnitionFile[]; directories?: IgnitionDirectory[]; links?: IgnitionLink[] };
  systemd: { units: IgnitionUnit[] };
}

// ---- MachineConfig ------------------------------------------------------------------------------

export interface MachineConfigSpec {
  config: IgnitionConfig;
  kernelArguments: string[];
  kernelType: KernelType;
  fips: boolean;
  extensions: string[];
  osImageURL: string;
  baseOSExtensionsContainerImage: string;
}

export interface MachineConfig {
  apiVersion: string;
  kind: 'MachineConfig';
  metadata: ObjectMeta;
  spec: MachineConfigSpec;
}

// ---- MachineConfigPool --------------------------------------------------------------------------

export type SelectorOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

export interface LabelSelectorRequirement {
  key: string;
  operator: SelectorOperator;
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Labels;
  matchExpressions?: LabelSelectorRequirement[];
}

/** mcplane addition: what a change under a path or to a unit needs instead of a reboot. */
/**
 * `drain` (MCO's Drain) empties a Kubernetes node of its workloads before the update; the control
 * plane does it, so the agent has nothing to run for it. Without a cluster there is nothing to drain.
 */
export type DisruptionActionType = 'none' | 'reload' | 'restart' | 'daemon-reload' | 'drain' | 'reboot';

export interface DisruptionAction {
  type: DisruptionActionType;
  /** The unit to reload or restart; required for those two types. */
  unit?: string;
}

/** mcplane addition (MCO keeps this in MachineConfiguration/cluster, not on the pool). */
export interface DisruptionPolicy {
  /** Path prefixes; the longest matching prefix wins. */
  files?: { path: string; actions: DisruptionAction[] }[];
  /** Unit names, matched exactly. */
  units?: { name: string; actions: DisruptionAction[] }[];
  /** SSH key changes; MCO's default is none. */
  sshkey?: { actions: DisruptionAction[] };
}

/** mcplane addition: a recurring time in which drains and reboots may start (maintenance-window.ts). */
export interface MaintenanceWindow {
  /** Five-field cron: minute hour day-of-month month day-of-week. */
  schedule: string;
  /** As written: "2h", "90m", "1h30m". */
  duration: string;
  /** IANA time zone the schedule is read in, e.g. "Europe/Berlin"; default "UTC". */
  timeZone: string;
}

/** Which updates wait for a window: only those that drain or reboot (default), or every one. */
export type MaintenanceWindowScope = 'Disruptive' | 'All';

/** mcplane addition: a budget per group of nodes (disruption-budget.ts). */
export interface DisruptionBudget {
  /** Label keys; nodes with the same values for all of them form one group. */
  groupBy: string[];
  /** An integer or a percentage of the group's nodes (rounded down, at least 1). */
  maxUnavailable: number | string;
}

/** mcplane addition: what the agent does when a managed file changes behind its back. */
/** Degrade: the node is Degraded; Reconcile: the agent rewrites the file; Adopt: the node keeps it and reports it for a proposal. */
export type DriftPolicy = 'Degrade' | 'Reconcile' | 'Adopt';

export interface MachineConfigPoolSpec {
  /** null means "selects nothing", {} means "selects every config", as in Kubernetes. */
  machineConfigSelector: LabelSelector | null;
  /** null or empty selects no node (MCO's rule for pools). */
  nodeSelector: LabelSelector | null;
  paused: boolean;
  /** An integer or a percentage such as "25%"; default 1. */
  maxUnavailable: number | string;
  disruptionPolicy?: DisruptionPolicy;
  driftPolicy: DriftPolicy;
  /** mcplane addition: paths and globs the agent watches for nothing (drift-ignore.ts). */
  driftIgnore?: string[];
  /** mcplane addition: how the leader's drains of this pool's nodes are bounded. */
  drain?: PoolDrainPolicy;
  /** mcplane addition: when drains and reboots may start (maintenance-window.ts). */
  maintenanceWindows?: MaintenanceWindow[];
  /** mcplane addition: Disruptive (default) holds drains and reboots for a window; All holds every update. */
  maintenanceWindowScope?: MaintenanceWindowScope;
  /** mcplane addition: when nodes may start downloading their next config ahead of the drain (staging); none: any time. */
  downloadWindows?: MaintenanceWindow[];
  /** mcplane addition: at most so many unavailable nodes per label group (disruption-budget.ts). */
  disruptionBudget?: DisruptionBudget;
  /** mcplane addition: canaries, soak and the circuit breaker (rollout-policy.ts). */
  rollout?: RolloutPolicy;
  /** mcplane addition: what must hold on a node after each update (rollout-policy.ts). */
  healthCheck?: HealthCheck;
  /** mcplane addition: lifecycle hooks the agent runs around each update (lifecycle-hooks.ts). */
  hooks?: LifecycleHooks;
  /** MCO's PinnedImageSetRefs: the PinnedImageSets whose images the pool's nodes pull and pin. */
  pinnedImageSets?: { name: string }[];
}

/** mcplane addition: what a pool does when nodes fail on a new config. */
export type RolloutFailureAction = 'Pause' | 'Rollback';

/** mcplane addition: how a pool rolls a new config out. Durations are kept as written ("10m"). */
export interface RolloutPolicy {
  /** Nodes that go first, in the rollout order: a count or a percentage ("10%", rounded up). */
  canary?: number | string;
  /** How long every canary must stay updated and Done before the rest go. */
  soak?: string;
  /** Nodes that may fail on a config before the pool stops (default 0: the first failure stops it). */
  maxFailures: number;
  onFailure: RolloutFailureAction;
  /**
   * Staging before the drain (os-staging.ts on the agent): Enabled (the default) downloads a
   * node's OS content while it serves and disrupts it only once staged; Disabled downloads
   * during the update, as before.
   */
  staging?: 'Enabled' | 'Disabled';
  /** Nodes downloading at once: a count or a percentage of the pool; default every node the rollout will reach. */
  maxStaging?: number | string;
  /** Try mode: each node must pass these checks (or be confirmed) within the timeout, or it reverts by itself. */
  confirm?: TryPolicy;
}

/** mcplane addition: a node's update fails unless these hold within `timeout` after it. */
export interface HealthCheck {
  /** Units that must be active. */
  units: string[];
  /** A command (argv, no shell) that must exit 0; empty for none. */
  command: string[];
  timeout: string;
}

/** mcplane addition: what happens when draining a node of the pool takes long. */
export interface PoolDrainPolicy {
  /** How long a drain may take before onTimeout applies; absent: no limit (MCO's behaviour). */
  timeoutSeconds?: number;
  /**
   * Wait: keep retrying and say so in the node's reason (MCO's behaviour). Degrade: also mark the
   * node Degraded with the reason, so the pool is Degraded and alerts fire; retries go on, and
   * the node recovers by itself when the drain completes.
   */
  onTimeout?: DrainTimeoutAction;
  /** After this long a drain sets the pool's NodeDrainStalled condition; default 600 (10 min). */
  stalledAfterSeconds?: number;
}

export type DrainTimeoutAction = 'Wait' | 'Degrade';

export interface MachineConfigPool {
  apiVersion: string;
  kind: 'MachineConfigPool';
  metadata: ObjectMeta;
  spec: MachineConfigPoolSpec;
}

// ---- MachineConfiguration (operator.openshift.io/v1) ---------------------------------------------

/**
 * MCO's operator configuration, named `cluster`. mcplane acts on spec.nodeDisruptionPolicy only,
 * kept in mcplane's DisruptionPolicy shape (MCO's action types mapped when it is read).
 */
export interface MachineConfiguration {
  apiVersion: string;
  kind: 'MachineConfiguration';
  metadata: ObjectMeta;
  spec: { nodeDisruptionPolicy: DisruptionPolicy };
}

export type Manifest = MachineConfig | MachineConfigPool | MachineConfiguration;

// ---- Rendered config ----------------------------------------------------------------------------

export interface RenderedConfig {
  /** rendered-<pool>-<hash> */
  name: string;
  pool: string;
  hash: string;
  spec: MachineConfigSpec;
  /** The canonical serialization of spec that the hash covers; store and send this rather than
   * serializing a multi-megabyte spec again. */
  specJson: string;
  /** The MachineConfigs merged, in merge order (MCO's status.configuration.source). */
  sources: string[];
}

import type { TryPolicy } from './try-policy.ts';
import type { LifecycleHooks } from './lifecycle-hooks.ts';

// ---- Node ---------------------------------------------------------------------------------------

/**
 * RolledBack (mcplane addition): the update failed its health check and the agent put the node
 * back on its previous config; it does not retry that config until an operator acts or a new one comes.
 * TryReverted (mcplane addition): the node tried the config (spec.rollout.confirm), its checks
 * did not pass within the timeout, and it reverted by itself; as RolledBack it waits for an
 * operator or a new config.
 */
export type NodeState = 'Done' | 'Working' | 'Degraded' | 'Unreconcilable' | 'RolledBack' | 'TryReverted';

/** What rpm-ostree reports for the booted deployment. */
export interface OsStatus {
  bootedImage: string;
  bootedChecksum: string;
  kernelArguments: string[];
  kernelType: string;
  extensions: string[];
  stagedImage: string;
  fips: boolean;
}

export interface Drift {
  path: string;
  kind: 'file' | 'unit';
  expectedHash: string;
  actualHash: string;
  detectedUnixMs: number;
  /** Under driftPolicy Adopt: the node's version of the file, base64 (drift-adoption.ts bounds it). */
  contentBase64?: string;
  /** The file's mode ("0644"), uid and gid on the node, when its content is reported. */
  mode?: string;
  user?: string;
  group?: string;
  /** Why no content is reported for this entry under Adopt (a unit, missing, withheld, over a bound). */
  contentOmitted?: string;
}

/** What the node's agent reports. */
export interface NodeStatus {
  currentConfig: string;
  /** The config the agent is working towards (it echoes the server's assignment). */
  desiredConfig: string;
  state: NodeState;
  phase: string;
  reason: string;
  drift: Drift[];
  os: OsStatus | null;
  bootId: string;
  agentVersion: string;
  lastDisruption: string;
  /** The update running now and the last one finished, from the agent's journal. */
  currentUpdate?: import('./update-record.ts').UpdateRecord | null;
  lastUpdate?: import('./update-record.ts').UpdateRecord | null;
  /** The OS content downloaded ahead of the next disruptive update (null: none needed). */
  staging?: StagingStatus | null;
  /** One per PinnedImageSet of the node's pool. */
  pinnedImageSets?: PinnedImageSetStatus[];
  /** The drift policy the agent acts on; "" (or absent) from agents that do not say. */
  driftPolicy?: DriftPolicy | '';
  /** Under Adopt, while drift is reported: the Drifted condition (the node stays Done). */
  drifted?: NodeCondition | null;
  /** What the agent can do beyond the base protocol ("staging"); absent from older agents. */
  agentFeatures?: string[];
}

/** A condition a node reports of itself (as MCO's MachineConfigNode conditions). */
export interface NodeCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTimeUnixMs: number;
}

/** A download ahead of the drain: Staging while it runs, Staged when the apply may go cache-only. */
export interface StagingStatus {
  config: string;
  state: 'Staging' | 'Staged' | 'Failed';
  bytesDone: number;
  /** 0 when not known. */
  bytesTotal: number;
  /** With Failed: the image or package and the cause. */
  reason: string;
  startedUnixMs: number;
  /** 0 while it runs. */
  endedUnixMs: number;
}

/** One PinnedImageSet on one node (MCO's PinnedImageSetRef status, plus counts). */
export interface PinnedImageSetStatus {
  name: string;
  desiredGeneration: number;
  /** The generation whose images are all pulled and pinned. */
  currentGeneration: number;
  imagesDone: number;
  imagesTotal: number;
  lastFailedImage: string;
  lastFailureReason: string;
  lastFailureUnixMs: number;
  /** Pending, Pulling, Pulled, Failed or Refused (src/agent/pinned-images.ts); absent from agents before it. */
  state?: string;
  /** The last failure's McplaneError code (MCPLANE_PINNED_IMAGE_PULL, ...); "" without one. */
  lastFailureCode?: string;
}

/** A registered host, as the control plane keeps it. */
export interface NodeRecord {
  name: string;
  labels: Labels;
  /** The node's primary pool; "" when no pool selects it (or two custom pools do). */
  pool: string;
  registeredAt: number;
  /** The control plane's decision: the rendered config this node must run. */
  desiredConfig: string;
  status: NodeStatus;
  lastSeen: number;
  connected: boolean;
}

// ---- Pool status --------------------------------------------------------------------------------

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface Condition {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  lastTransitionTime: number;
}

export interface PoolStatus {
  configuration: string;
  configurationSources: string[];
  machineCount: number;
  updatedMachineCount: number;
  readyMachineCount: number;
  unavailableMachineCount: number;
  degradedMachineCount: number;
  conditions: Condition[];
  /** mcplane addition: the pool's maintenance window as of the last status: "open until …", "next … (in …)". */
  maintenanceWindow?: string;
}
