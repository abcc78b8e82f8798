// The control plane labels its phase metrics with a fixed list (anything else is "other", so an
// agent cannot grow a scrape without bound); every phase the agent's step table reports must be
// on it, or a new step (the hooks, a try) is counted as "other" on every dashboard.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { UPDATE_PHASES } from '../../src/agent/update-steps.ts';
import { KNOWN_PHASES, phaseLabel } from '../../src/controlplane/metrics/phase-tracker.ts';

test('every phase the agent reports has its own label in the control plane\'s metrics; an unknown one is "other"', () => {
  assert.deepEqual(UPDATE_PHASES.filter((p) => !KNOWN_PHASES.includes(p)), []);
  for (const p of UPDATE_PHASES) assert.equal(phaseLabel(p), p);
  assert.ok(KNOWN_PHASES.includes('drain'), 'the leader\'s drain');
  assert.equal(phaseLabel('a phase no agent reports'), 'other');
});
