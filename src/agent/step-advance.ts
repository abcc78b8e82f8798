// The one place an update's journaled step changes: the step table (update-steps.ts) names the
// next step for what happened, the journal records it (with whatever else changes alongside, in
// the same write), and the new step's failpoint fires once it is on disk.

import type { Advance } from './file-transaction.ts';
import type { Failpoints } from './failpoints.ts';
import type { Journal } from './journal.ts';
import { nextStep, stepNamed, type Failpoint } from './update-steps.ts';

export function stepAdvance(journal: Journal, failpoints: Failpoints): Advance {
  return (event, change) => {
    const to = nextStep(journal.state.pending!.step, event);
    journal.update((s) => {
      change?.(s);
      s.pending!.step = to;
    });
    if (stepNamed(to).failpoint) failpoints.hit(to as Failpoint);
  };
}
