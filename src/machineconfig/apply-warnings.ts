// What Apply accepts but answers with a warning (ApplyResponse.warnings, printed by mcctl on
// stderr): a request that is valid and yet, most likely, not what its author meant.

import type { ApplyRequest } from './apply-request.ts';
import { selfReportedSelectorWarnings } from './pool-membership.ts';
import type { MachineConfigPool } from './types.ts';
import { unselectedConfigWarnings } from './unselected-configs.ts';

/**
 * The warnings for an apply request: its MachineConfigs that no pool would select once stored,
 * its pools that select on labels a host could set for itself, and what its documents' own
 * validation found (the keys of its KubeletConfigs that are no KubeletConfiguration field, which
 * MCO drops without a word).
 */
export function applyWarnings(request: ApplyRequest, storedPools: readonly MachineConfigPool[]): string[] {
  return [...unselectedConfigWarnings(request, storedPools), ...selfReportedSelectorWarnings(request.pools), ...request.warnings];
}
