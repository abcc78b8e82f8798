// Builders for test manifests. They produce raw documents (what a user writes), not parsed
// objects, so tests go through the same parsing path as real input.

import { parseDocuments, type MachineConfig, type MachineConfigPool } from '../../src/machineconfig/index.ts';

export type Doc = Record<string, unknown>;

export function mcDoc(name: string, role: string, spec: Doc = {}): Doc {
  return {
    apiVersion: 'machineconfiguration.openshift.io/v1',
    kind: 'MachineConfig',
    metadata: { name, labels: { 'machineconfiguration.openshift.io/role': role } },
    spec,
  };
}

export function ign(version: string, body: Doc = {}): Doc {
  return { ignition: { version }, ...body };
}

export function fileEntry(path: string, text: string, extra: Doc = {}): Doc {
  return { path, mode: 0o644, contents: { source: 'data:;base64,' + Buffer.from(text).toString('base64') }, ...extra };
}

export function poolDoc(name: string, spec: Doc): Doc {
  return { apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'MachineConfigPool', metadata: { name }, spec };
}

/** Parses documents and fails loudly if any is invalid: for tests that need valid objects. */
/** A PinnedImageSet of the given image references (digests). */
export function pinnedImageSetDoc(name: string, refs: string[]): Doc {
  return { apiVersion: 'machineconfiguration.openshift.io/v1', kind: 'PinnedImageSet', metadata: { name }, spec: { pinnedImages: refs.map((r) => ({ name: r })) } };
}

/** The worker pool (MCO's selectors) naming these PinnedImageSets in spec.pinnedImageSets. */
export function workerPoolWithSets(...sets: string[]): Doc {
  return poolDoc('worker', {
    machineConfigSelector: { matchLabels: { 'machineconfiguration.openshift.io/role': 'worker' } },
    nodeSelector: { matchLabels: { 'node-role.kubernetes.io/worker': '' } },
    pinnedImageSets: sets.map((name) => ({ name })),
  });
}

export function parseValid(...docs: Doc[]): { configs: MachineConfig[]; pools: MachineConfigPool[] } {
  const parsed = parseDocuments(docs.map((value, i) => ({ source: `test#${i}`, value })));
  if (parsed.problems.length) throw new Error('unexpected problems: ' + JSON.stringify(parsed.problems, null, 2));
  return parsed;
}

export function problemsOf(...docs: Doc[]) {
  return parseDocuments(docs.map((value, i) => ({ source: `test#${i}`, value }))).problems;
}

export function fileText(source: string): string {
  const comma = source.indexOf(',');
  return Buffer.from(source.slice(comma + 1), 'base64').toString('utf8');
}

/** A MachineConfigPool as YAML, selecting configs by role `name` and nodes labelled with it. */
export function poolYaml(name: string, extraSpec = ''): string {
  return `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: ${name}}
spec:
  machineConfigSelector: {matchLabels: {machineconfiguration.openshift.io/role: ${name}}}
  nodeSelector: {matchLabels: {node-role.kubernetes.io/${name}: ""}}
${extraSpec}`;
}

/** A MachineConfig as YAML; `spec` is the indented body under spec:. */
export function mcYaml(name: string, role: string, spec: string): string {
  return `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: ${name}, labels: {machineconfiguration.openshift.io/role: ${role}}}
spec:
${spec}`;
}

/**
 * A MachineConfig for the worker role (50-demo unless named), as the agent tests use it:
 * /etc/demo/motd and an enabled oneshot demo.service (Description=demo unless given). `files`
 * adds more under spec.config.storage.files; `tail` adds text at the end (spec fields, indented
 * two spaces).
 */
export function demoServiceConfig(motd: string, options: { name?: string; description?: string; mode?: string; sshKey?: string; kernelArguments?: string; files?: Record<string, string>; tail?: string } = {}): string {
  const file = (path: string, text: string, mode: string) => `        - {path: ${path}, mode: ${mode}, contents: {source: "data:,${encodeURIComponent(text)}"}}\n`;
  return mcYaml(options.name ?? '50-demo', 'worker', `${options.kernelArguments !== undefined ? `  kernelArguments: [${options.kernelArguments}]\n` : ''}  config:
    ignition: {version: 3.4.0}
${options.sshKey ? `    passwd: {users: [{name: core, sshAuthorizedKeys: ["${options.sshKey}"]}]}\n` : ''}    storage:
      files:
${file('/etc/demo/motd', motd, options.mode ?? '0644')}${Object.entries(options.files ?? {}).map(([path, text]) => file(path, text, '0644')).join('')}    systemd:
      units:
        - name: demo.service
          enabled: true
          contents: |
            [Unit]
            Description=${options.description ?? 'demo'}
            [Service]
            Type=oneshot
            RemainAfterExit=yes
            ExecStart=/bin/true
            [Install]
            WantedBy=default.target
${options.tail ?? ''}`);
}

/**
 * Pool infra taking the worker configs too, with a policy of its own for demo.service only
 * (daemon-reload, then restart): the custom pool the cluster-policy and preview tests put a host in,
 * where a change to /etc/demo/ is decided by the cluster policy, not the pool's.
 */
export const INFRA_POOL_WITH_UNIT_POLICY = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: infra}
spec:
  machineConfigSelector:
    matchExpressions:
      - {key: machineconfiguration.openshift.io/role, operator: In, values: [worker, infra]}
  nodeSelector:
    matchLabels: {node-role.kubernetes.io/infra: ""}
  disruptionPolicy:
    units:
      - {name: demo.service, actions: [{type: daemon-reload}, {type: restart, unit: demo.service}]}
`;

/**
 * A MachineConfig writing `text` to `path` and carrying broken.service, a oneshot that always
 * fails (ExecStart=/bin/false): what the failure tests restart to see a failed unit reported.
 */
export function brokenUnitConfig(name: string, role: string, path: string, text: string): string {
  return mcYaml(name, role, `  config:
    ignition: {version: 3.4.0}
    storage: {files: [{path: ${path}, contents: {source: "data:,${text}"}}]}
    systemd:
      units:
        - name: broken.service
          contents: |
            [Service]
            Type=oneshot
            ExecStart=/bin/false
`);
}

/**
 * Pool infra beside the built-in ones, and 99-master-secret, a master-only config carrying the
 * kernel argument `karg`: what a node or bootstrap token of another pool must never be given.
 */
export function masterSecretManifests(karg: string): { source: string; text: string }[] {
  return [
    { source: 'infra.yaml', text: poolYaml('infra') },
    { source: 'master.yaml', text: mcYaml('99-master-secret', 'master', `  kernelArguments: [${karg}]\n`) },
  ];
}
