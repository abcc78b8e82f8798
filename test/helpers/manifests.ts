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
