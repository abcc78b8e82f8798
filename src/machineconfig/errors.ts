// Every error mcplane raises on purpose is declared here, each a class with a stable `code`.
// Callers (the CLI, the gRPC layer, the agent's reason reporting) switch on `code`, never on
// message text, so messages can improve without breaking anyone.

/** One thing wrong with one object: where it is, which rule it breaks, and in words. */
export interface Problem {
  /** Where the object came from, e.g. "examples/50-infra.yaml#0"; absent for API input. */
  source?: string;
  /** "Kind/name", e.g. "MachineConfig/50-infra". */
  object: string;
  /** Field path inside the object, e.g. "spec.config.storage.files[0].mode". */
  field: string;
  /** Stable rule identifier, e.g. "file-mode-range". */
  rule: string;
  message: string;
}

export function formatProblem(p: Problem): string {
  const where = p.source ? `${p.source}: ` : '';
  return `${where}${p.object}: ${p.field}: ${p.message} [${p.rule}]`;
}

export class McplaneError extends Error {
  readonly code: string = 'MCPLANE_ERROR';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A document (or a set of them) breaks one or more rules; `problems` lists every one. */
export class InvalidDocumentError extends McplaneError {
  override readonly code = 'MCPLANE_INVALID_DOCUMENT';
  readonly problems: Problem[];
  constructor(problems: Problem[]) {
    super(summarize('invalid document', problems));
    this.problems = problems;
  }
}

/** A pool's configs could not be merged into a rendered config. */
export class RenderError extends McplaneError {
  override readonly code = 'MCPLANE_RENDER_FAILED';
  readonly pool: string;
  readonly problems: Problem[];
  constructor(pool: string, problems: Problem[]) {
    super(summarize(`pool ${pool}: render failed`, problems));
    this.pool = pool;
    this.problems = problems;
  }
}

/** A node's labels match more than one custom pool; MCO refuses to guess, and so do we. */
export class PoolConflictError extends McplaneError {
  override readonly code = 'MCPLANE_POOL_CONFLICT';
  readonly node: string;
  readonly pools: string[];
  constructor(node: string, pools: string[]) {
    super(`node ${node} matches more than one custom pool (${pools.join(', ')}); a node belongs to exactly one pool: change the pools' nodeSelectors or the node's labels`);
    this.node = node;
    this.pools = pools;
  }
}

export class UnknownPoolError extends McplaneError {
  override readonly code = 'MCPLANE_UNKNOWN_POOL';
  readonly pool: string;
  constructor(pool: string, known: string[]) {
    super(`MachineConfigPool/${pool} does not exist (known pools: ${known.length ? known.join(', ') : 'none'})`);
    this.pool = pool;
  }
}

export class NotFoundError extends McplaneError {
  override readonly code = 'MCPLANE_NOT_FOUND';
  readonly kind: string;
  readonly objectName: string;
  constructor(kind: string, objectName: string) {
    super(`${kind}/${objectName} not found`);
    this.kind = kind;
    this.objectName = objectName;
  }
}

/** Compare-and-swap lost: somebody else wrote the object since it was read. */
export class ConflictError extends McplaneError {
  override readonly code = 'MCPLANE_CONFLICT';
  readonly kind: string;
  readonly objectName: string;
  constructor(kind: string, objectName: string, expected: string, actual: string) {
    super(`${kind}/${objectName}: resourceVersion ${expected} is stale (current ${actual}); read it again and retry`);
    this.kind = kind;
    this.objectName = objectName;
  }
}

/** A commit broke one of the store's limits (operations per commit, bytes per request). */
export class StoreLimitError extends McplaneError {
  override readonly code = 'MCPLANE_STORE_LIMIT';
}

/** The store could not be reached or did not answer in time; the operation may be retried. */
export class StoreUnavailableError extends McplaneError {
  override readonly code = 'MCPLANE_STORE_UNAVAILABLE';
}

/** The caller is authenticated but not allowed to do this. */
export class PermissionDeniedError extends McplaneError {
  override readonly code = 'MCPLANE_PERMISSION_DENIED';
}

/** The object is not in a state the request needs (a node with no certificate to revoke). */
export class PreconditionFailedError extends McplaneError {
  override readonly code = 'MCPLANE_PRECONDITION_FAILED';
}

/** Too many requests from one caller (a node's reconnects, failed enrollments): retry later. */
export class RateLimitedError extends McplaneError {
  override readonly code = 'MCPLANE_RATE_LIMITED';
  readonly retryAfterSeconds: number;
  constructor(message: string, retryAfterSeconds: number) {
    super(`${message}; retry in ${retryAfterSeconds} s`);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** The caller could not be authenticated (no or bad token, no client certificate). */
export class UnauthenticatedError extends McplaneError {
  override readonly code = 'MCPLANE_UNAUTHENTICATED';
}

/** A command for a node cannot be delivered because its agent is not connected. */
export class NodeNotConnectedError extends McplaneError {
  override readonly code = 'MCPLANE_NODE_NOT_CONNECTED';
}

/** mcctl confirm names a node (or a pool with no node) that is not trying a config (spec.rollout.confirm). */
export class NotTryingError extends McplaneError {
  override readonly code = 'MCPLANE_NOT_TRYING';
}

/** A call to a server failed; the message explains what the gRPC status means for the user. */
export class RemoteCallError extends McplaneError {
  override readonly code = 'MCPLANE_REMOTE_CALL';
  readonly grpcCode: number;
  readonly problems: Problem[];
  constructor(message: string, grpcCode: number, problems: Problem[] = []) {
    super(message);
    this.grpcCode = grpcCode;
    this.problems = problems;
  }
}

/** A systemd D-Bus call or job failed; the message names the method, the unit and the result. */
export class SystemdError extends McplaneError {
  override readonly code = 'MCPLANE_SYSTEMD';
}

/** An rpm-ostree command failed (other than being busy, which is retried). */
export class RpmOstreeError extends McplaneError {
  override readonly code = 'MCPLANE_RPM_OSTREE';
  readonly busy: boolean;
  constructor(message: string, busy: boolean = false) {
    super(message);
    this.busy = busy;
  }
}

/**
 * A download ahead of the drain (or the apply after it) would leave the file system rpm-ostree
 * writes to under its floor: the message names the file system, the bytes free and needed.
 */
export class InsufficientDiskError extends McplaneError {
  override readonly code = 'MCPLANE_INSUFFICIENT_DISK';
  readonly fileSystem: string;
  readonly freeBytes: number;
  readonly neededBytes: number;
  constructor(fileSystem: string, freeBytes: number, neededBytes: number, what: string) {
    super(`${fileSystem} has ${freeBytes} bytes free; ${what} needs ${neededBytes} bytes free there (${formatBytes(freeBytes)} free, ${formatBytes(neededBytes)} needed)`);
    this.fileSystem = fileSystem;
    this.freeBytes = freeBytes;
    this.neededBytes = neededBytes;
  }
}

/** 1.5 GiB, 300 MiB: for messages. */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

/**
 * A step of a node update failed. The message is what the node's reason shows: the step, the
 * object and the cause, e.g. "apply: file /etc/chrony.conf: EACCES: permission denied".
 */
export class UpdateStepError extends McplaneError {
  override readonly code: 'MCPLANE_UPDATE_STEP' | 'MCPLANE_UNRECONCILABLE' = 'MCPLANE_UPDATE_STEP';
  readonly step: string;
  readonly object: string;
  readonly cause_: string;
  constructor(step: string, object: string, cause_: string) {
    super(`${step}: ${object}: ${cause_}`);
    this.step = step;
    this.object = object;
    this.cause_ = cause_;
  }
}

/** The change cannot be applied to a running host at all (MCO's Unreconcilable). */
export class UnreconcilableError extends UpdateStepError {
  override readonly code = 'MCPLANE_UNRECONCILABLE';
}

/** A configuration file or flag given to one of mcplane's programs is wrong. */
export class ConfigurationError extends McplaneError {
  override readonly code = 'MCPLANE_CONFIGURATION';
}

/**
 * A backup or restore of the SQLite store cannot go ahead: the file is not an mcplane store,
 * the target exists, or a running server holds the data directory. Names the file and what to do.
 */
export class BackupError extends McplaneError {
  override readonly code = 'MCPLANE_BACKUP';
}

/** Reading a manifest file or directory failed (missing, unreadable). */
export class ManifestReadError extends McplaneError {
  override readonly code = 'MCPLANE_MANIFEST_READ';
  readonly path: string;
  constructor(path: string, cause: unknown) {
    super(`cannot read ${path}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.path = path;
  }
}

function summarize(what: string, problems: Problem[]): string {
  const lines = problems.map((p) => `  - ${formatProblem(p)}`);
  return `${what}: ${problems.length} problem${problems.length === 1 ? '' : 's'}\n${lines.join('\n')}`;
}

/** This replica stopped leading (or never did) while a leader-only write was under way. */
export class NotLeaderError extends McplaneError {
  override readonly code = 'MCPLANE_NOT_LEADER';
}

/** `mcctl wait` / `rollout status`: the pool did not get there (degraded, render failed, deleted, out of time). */
export class WaitFailedError extends McplaneError {
  override readonly code = 'MCPLANE_WAIT_FAILED';
}

/** A YAML file does not parse; each location names the file, line and column, and shows the line. */
export interface YamlSyntaxLocation {
  file: string;
  line: number;
  column: number;
  message: string;
  /** The offending line, as written. */
  sourceLine: string;
}

export class YamlSyntaxError extends McplaneError {
  override readonly code = 'MCPLANE_YAML_SYNTAX';
  readonly locations: YamlSyntaxLocation[];
  constructor(locations: YamlSyntaxLocation[]) {
    super(locations.map(formatYamlSyntaxLocation).join('\n'));
    this.locations = locations;
  }
}

/** `file:line:column: message`, then the line with a caret under the column, as compilers print. */
export function formatYamlSyntaxLocation(l: YamlSyntaxLocation): string {
  const gutter = String(l.line);
  return `${l.file}:${l.line}:${l.column}: ${l.message}\n  ${gutter} | ${l.sourceLine}\n  ${' '.repeat(gutter.length)} | ${' '.repeat(Math.max(0, l.column - 1))}^`;
}

/**
 * A path the agent checked turned out, when it came to write, to go through a symbolic link or a
 * non-directory: the tree changed after the check, and following it could lead out of /etc and
 * /var. `path` is the file, `component` the directory that changed.
 */
export class UnsafePathError extends McplaneError {
  override readonly code = 'MCPLANE_UNSAFE_PATH';
  readonly path: string;
  readonly component: string;
  constructor(path: string, component: string) {
    super(`${component} is a symbolic link or not a directory (it changed after ${path} was checked); refusing to follow it`);
    this.path = path;
    this.component = component;
  }
}

/** The agent's journal cannot be read (not merely corrupt, which is moved aside and recovered). */
export class JournalError extends McplaneError {
  override readonly code = 'MCPLANE_JOURNAL';
}

/**
 * The control plane runs with --kubernetes-source: MachineConfigs and MachineConfigPools come
 * from the Kubernetes cluster, so changing them through mcplane's API is refused (the next sync
 * would undo it); the message says where to make the change instead.
 */
export class KubernetesSourceError extends McplaneError {
  override readonly code = 'MCPLANE_KUBERNETES_SOURCE';
}

/** A call to the Kubernetes API failed (`mcctl import`); `httpCode` is 0 when no answer came. */
export class KubernetesApiError extends McplaneError {
  override readonly code = 'MCPLANE_KUBERNETES_API';
  readonly httpCode: number;
  constructor(message: string, httpCode: number) {
    super(message);
    this.httpCode = httpCode;
  }
}

/**
 * A TOML text (registries.conf, storage.conf, a CRI-O drop-in) does not parse; `line` is 1-based.
 * Raised by the TOML reader and turned into a Problem naming the config and file that carried it.
 */
export class TomlSyntaxError extends McplaneError {
  override readonly code = 'MCPLANE_TOML_SYNTAX';
  readonly reason: string;
  readonly line?: number;
  constructor(reason: string, line?: number) {
    super(line === undefined ? reason : `${reason} at line ${line}`);
    this.reason = reason;
    this.line = line;
  }
}

/**
 * A KubeletConfig, ContainerRuntimeConfig or the registries sources (Image, ImageDigestMirrorSet,
 * ImageTagMirrorSet, ImageContentSourcePolicy) could not be made into a MachineConfig for a pool:
 * MCO's Failure condition. Each problem names the source object, the field and the rule; the
 * source's status carries the message.
 */
export class GenerateConfigError extends McplaneError {
  override readonly code = 'MCPLANE_GENERATE_FAILED';
  readonly problems: Problem[];
  constructor(problems: Problem[]) {
    super(summarize('cannot generate MachineConfig', problems));
    this.problems = problems;
  }
}

/**
 * The container runtime's CRI image service (its unix socket) failed a call: `call` is the RPC,
 * `reason` the runtime's own words. The pinned image puller records it in a set's status.
 */
export class CriCallError extends McplaneError {
  override readonly code = 'MCPLANE_CRI_CALL';
  readonly call: string;
  readonly reason: string;
  constructor(call: string, reason: string, options?: ErrorOptions) {
    super(`CRI ImageService.${call}: ${reason}`, options);
    this.call = call;
    this.reason = reason;
  }
}

/**
 * A pinned image set refused before any pull: its missing images need more of the image
 * filesystem than it can give while keeping `minFreeBytes` free (MCO's errInsufficientStorage).
 */
export class PinnedImageDiskSpaceError extends McplaneError {
  override readonly code = 'MCPLANE_PINNED_IMAGE_DISK_SPACE';
  readonly set: string;
  readonly mountpoint: string;
  readonly freeBytes: number;
  readonly neededBytes: number;
  readonly minFreeBytes: number;
  constructor(set: string, mountpoint: string, freeBytes: number, neededBytes: number, minFreeBytes: number) {
    super(`PinnedImageSet/${set}: image filesystem ${mountpoint} has ${freeBytes} bytes free; the set's missing images need ${neededBytes} bytes and ${minFreeBytes} bytes must stay free, so nothing of the set is pulled`);
    this.set = set;
    this.mountpoint = mountpoint;
    this.freeBytes = freeBytes;
    this.neededBytes = neededBytes;
    this.minFreeBytes = minFreeBytes;
  }
}

/** One pinned image could not be pulled after every retry. */
export class PinnedImagePullError extends McplaneError {
  override readonly code = 'MCPLANE_PINNED_IMAGE_PULL';
  readonly image: string;
  readonly attempts: number;
  readonly reason: string;
  constructor(image: string, attempts: number, reason: string) {
    super(`pulling ${image} failed after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${reason}`);
    this.image = image;
    this.attempts = attempts;
    this.reason = reason;
  }
}

/** Every error class mcplane raises on purpose: the code-to-status table is checked against it. */
export const ERROR_CLASSES = [
  InvalidDocumentError, RenderError, PoolConflictError, UnknownPoolError, NotFoundError, ConflictError,
  StoreLimitError, StoreUnavailableError, PermissionDeniedError, UnauthenticatedError, NodeNotConnectedError,
  RemoteCallError, SystemdError, RpmOstreeError, UpdateStepError, UnreconcilableError, ConfigurationError,
  ManifestReadError, NotLeaderError, WaitFailedError, YamlSyntaxError, UnsafePathError, JournalError,
  // New classes at the end of this list (several branches add theirs).
  KubernetesSourceError, KubernetesApiError,
  PreconditionFailedError, RateLimitedError,
  TomlSyntaxError, GenerateConfigError,
  // The pinned image puller's (the agent's): their codes reach the control plane in a set's
  // status (PinnedImageSetStatus.lastFailureCode), never as an API error.
  CriCallError, PinnedImageDiskSpaceError, PinnedImagePullError,
  InsufficientDiskError,
  NotTryingError,
] as const;

/** The stable codes, one per class above. */
export type McplaneErrorCode = InstanceType<(typeof ERROR_CLASSES)[number]>['code'];
