// What Apply accepts but answers with a warning (ApplyResponse.warnings, printed by mcctl on
// stderr): a request that is valid and yet, most likely, not what its author meant.

import { KIND_KUBELET_CONFIG } from './kubelet-config.ts';
import { decodeKubeletConfiguration } from './kubelet-configuration.ts';
import { parseDocuments, readDocuments } from './manifest.ts';
import { selfReportedSelectorWarnings } from './pool-membership.ts';
import { ProblemCollector } from './problem-collector.ts';
import type { SourceObject } from './generated-configs.ts';
import type { MachineConfigPool } from './types.ts';
import { unselectedConfigWarnings } from './unselected-configs.ts';

/**
 * The warnings for an apply request: its MachineConfigs that no pool would select once stored,
 * its pools that select on labels a host could set for itself, and the keys of its
 * KubeletConfigs that are no KubeletConfiguration field (MCO drops them without a word).
 */
export function applyWarnings(manifests: readonly { source: string; text: string }[], storedPools: readonly MachineConfigPool[]): string[] {
  const parsed = parseDocuments(manifests.flatMap(({ source, text }) => readDocuments(text, source).documents));
  return [...unselectedConfigWarnings(parsed, storedPools), ...selfReportedSelectorWarnings(parsed.pools), ...ignoredKubeletFieldWarnings(parsed.sources)];
}

function ignoredKubeletFieldWarnings(sources: readonly SourceObject[]): string[] {
  return sources.flatMap((s) => {
    if (s.kind !== KIND_KUBELET_CONFIG || !s.spec.kubeletConfig) return [];
    const object = `${KIND_KUBELET_CONFIG}/${s.metadata.name}`;
    const { ignored } = decodeKubeletConfiguration(s.spec.kubeletConfig, new ProblemCollector(object), 'spec.kubeletConfig');
    return ignored.map((key) => `${object}: spec.kubeletConfig.${key} is not a KubeletConfiguration field, so it is left out of kubelet.conf (as MCO leaves it out); check its spelling`);
  });
}
