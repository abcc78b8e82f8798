// mcctl import --kubeconfig FILE [--dry-run]: the path off MCO. Reads an existing cluster's
// MachineConfigs and MachineConfigPools once and sends them through ConfigService.Apply (its
// dry run for --dry-run), so they get Apply's validation and all-or-nothing store, and prints
// what Apply did as `mcctl apply` does. MCO's rendered-* configs are its output, not input:
// they are skipped, and each one is named on stderr. Status and server metadata are left out.

import {
  ConfigurationError,
  isRenderedConfigName,
  KIND_MACHINE_CONFIG,
  KIND_MACHINE_CONFIG_POOL,
  manifestFromClusterObject,
  KubernetesApiError,
  type ClusterKind,
} from '../../machineconfig/index.ts';
import { kubeFailureOf, loadKubernetesAccess, type KubernetesAccess } from '../../runtime/kube-client.ts';
import { call } from '../client/call.ts';
import type { Clients } from '../client/connection.ts';
import { forDisplay } from '../format.ts';

const GROUP = 'machineconfiguration.openshift.io';
const KIND_NAMES: Record<string, string> = { MachineConfig: 'machineconfig', MachineConfigPool: 'machineconfigpool' };

async function listKind(kube: KubernetesAccess, kind: ClusterKind, plural: string): Promise<{ kind: ClusterKind; object: { metadata?: { name?: string } } }[]> {
  try {
    const list = await kube.custom.listClusterCustomObject({ group: GROUP, version: 'v1', plural }) as { items?: { metadata?: { name?: string } }[] };
    return (list.items ?? []).map((object) => ({ kind, object }));
  } catch (err) {
    const f = kubeFailureOf(err);
    const why = f.code === 401 ? 'the cluster rejected the credentials (401)'
      : f.code === 403 ? `not allowed (403): the user needs list on ${plural}.${GROUP}`
      : f.code === 404 ? `the cluster has no ${plural}.${GROUP} (404): is it an OpenShift cluster with the Machine Config Operator?`
      : f.message;
    throw new KubernetesApiError(`cannot list ${plural}.${GROUP} at ${kube.server} (${kube.credentials}): ${why}`, f.code);
  }
}

export async function importCommand(c: Clients, kubeconfig: string, dryRun: boolean, note: (text: string) => void = () => {}): Promise<string> {
  const kube = loadKubernetesAccess({ kubeconfig });
  const found = [...await listKind(kube, KIND_MACHINE_CONFIG_POOL, 'machineconfigpools'), ...await listKind(kube, KIND_MACHINE_CONFIG, 'machineconfigs')];
  const manifests: { source: string; text: string }[] = [];
  const skipped: string[] = [];
  for (const { kind, object } of found) {
    const name = object.metadata?.name ?? '';
    if (kind === KIND_MACHINE_CONFIG && isRenderedConfigName(name)) {
      skipped.push(name);
      continue;
    }
    manifests.push({ source: 'kubernetes', text: JSON.stringify(manifestFromClusterObject(kind, object)) });
  }
  for (const name of skipped.sort()) note(`skipped machineconfig/${name}: MCO's rendered config (mcplane renders its own)\n`);
  if (manifests.length === 0) throw new ConfigurationError(`nothing to import: ${kube.server} has no MachineConfigs or MachineConfigPools besides MCO's rendered ones`);
  const res = await call(c, c.config.apply.bind(c.config), { manifests, dryRun }, 'import');
  for (const w of res.warnings ?? []) note(`Warning: ${w}\n`);
  const suffix = dryRun ? ' (dry run)' : '';
  return forDisplay(res.objects).map((o) => `${KIND_NAMES[o.kind] ?? o.kind.toLowerCase()}/${o.name} ${o.action}${suffix}\n`).join('');
}
