// Names and limits that mirror machineconfiguration.openshift.io/v1, kept in one place so the
// control plane, agent and CLI agree on them.

export const API_VERSION = 'machineconfiguration.openshift.io/v1';
export const KIND_MACHINE_CONFIG = 'MachineConfig';
export const KIND_MACHINE_CONFIG_POOL = 'MachineConfigPool';
/** MCO's operator configuration, which holds the cluster-wide node disruption policy. */
export const OPERATOR_API_VERSION = 'operator.openshift.io/v1';
export const KIND_MACHINE_CONFIGURATION = 'MachineConfiguration';
/** The one MachineConfiguration MCO reads; it refuses any other name. */
export const CLUSTER_MACHINE_CONFIGURATION = 'cluster';

/** The label MachineConfigs carry to say which pool role they are for. */
export const ROLE_LABEL = 'machineconfiguration.openshift.io/role';
/** Node label prefix for roles, e.g. node-role.kubernetes.io/worker. */
export const NODE_ROLE_LABEL_PREFIX = 'node-role.kubernetes.io/';
export const ZONE_LABEL = 'topology.kubernetes.io/zone';

export const MASTER_POOL = 'master';
export const WORKER_POOL = 'worker';

/** The Ignition spec every config is converted to internally, and served by default. */
export const INTERNAL_IGNITION_VERSION = '3.4.0';
export const SUPPORTED_IGNITION_VERSIONS = ['2.2.0', '3.0.0', '3.1.0', '3.2.0', '3.3.0', '3.4.0', '3.5.0'] as const;

export const KERNEL_TYPES = ['default', 'realtime', '64k-pages'] as const;
export type KernelType = (typeof KERNEL_TYPES)[number];

/** MCO's extension allowlist (pkg/controller/common/helpers.go, SupportedExtensions). */
export const SUPPORTED_EXTENSIONS = [
  'two-node-ha',
  'ipsec',
  'usbguard',
  'kerberos',
  'kernel-devel',
  'sandboxed-containers',
  'sysstat',
] as const;

/** Trees a MachineConfig may write on an image-based host. /usr is the read-only OS image. */
export const WRITABLE_ROOTS = ['/etc', '/var'] as const;
/** CoreOS links these into /var; the agent re-checks the resolved path on the host itself. */
export const LINKED_INTO_VAR_ROOTS = ['/usr/local', '/opt'] as const;
/** The agent's own config (its credential) and state (its journal): a MachineConfig that could
 * write there could take over the node's identity or rewrite what the agent believes it did. */
export const AGENT_OWNED_ROOTS = ['/etc/mcplane', '/var/lib/mcplane'] as const;

/** etcd's default request size limit: MCO cannot store a rendered config above it, nor do we. */
export const MAX_RENDERED_CONFIG_BYTES = 1.5 * 1024 * 1024;
/** One file's decoded (and decompressed) contents: a file above it could never render anyway. */
export const MAX_FILE_CONTENTS_BYTES = MAX_RENDERED_CONFIG_BYTES;
/** All files of one MachineConfig, decoded: the same bound, for the same reason. */
export const MAX_CONFIG_CONTENTS_BYTES = MAX_RENDERED_CONFIG_BYTES;
/** All MachineConfigs of one Apply, decoded: no more than the largest request could carry plainly
 * (the server's receive limit, MAX_SERVER_RECEIVE_BYTES), so gzip cannot multiply what a request
 * costs the server. */
export const MAX_APPLY_CONTENTS_BYTES = 8 * 1024 * 1024;

/** Ignition's default file mode when a config gives none. */
export const DEFAULT_FILE_MODE = 0o644;
export const MAX_FILE_MODE = 0o777;

export const SYSTEMD_UNIT_SUFFIXES = [
  '.service', '.socket', '.target', '.timer', '.path', '.mount', '.automount',
  '.swap', '.slice', '.scope', '.device',
] as const;
