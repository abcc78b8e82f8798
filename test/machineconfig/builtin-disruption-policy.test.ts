// MCO's built-in node disruption policies (machine-config-operator 7ff337a4
// pkg/apihelpers/apihelpers.go defaultClusterPolicies, merged as MergeClusterPolicies does) and
// the registries.conf Special action (pkg/daemon/drain.go isDrainRequiredForNodeDisruptionActions
// / isSafeContainerRegistryConfChanges), as planDisruption decides them and names the rule.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { diffSpecs, planDisruption, needsDrain, updateActionOf } from '../../src/machineconfig/index.ts';
import { encodeDataUrl } from '../../src/machineconfig/data-url.ts';
import { emptyIgnitionConfig } from '../../src/machineconfig/ignition.ts';
import type { MachineConfigSpec } from '../../src/machineconfig/types.ts';

function spec(files: Record<string, string>): MachineConfigSpec {
  const config = emptyIgnitionConfig();
  config.storage.files = Object.entries(files).map(([path, text]) => ({ path, mode: 0o644, overwrite: true, contents: { source: encodeDataUrl(Buffer.from(text)) } }));
  return { config, kernelArguments: [], kernelType: 'default', fips: false, extensions: [], osImageURL: '', baseOSExtensionsContainerImage: '' };
}
const REG = '/etc/containers/registries.conf';
const base = 'unqualified-search-registries = ["docker.io"]\n';
const digestMirror = `${base}\n[[registry]]\n  prefix = ""\n  location = "quay.io/a"\n\n  [[registry.mirror]]\n    location = "mirror.io/a"\n    pull-from-mirror = "digest-only"\n`;
const tagMirror = digestMirror.replace('digest-only', 'tag-only');

test('registries.conf: a new digest-only mirror reloads crio without a drain, and the rule says why', () => {
  const plan = planDisruption(diffSpecs(spec({ [REG]: base }), spec({ [REG]: digestMirror })), undefined);
  assert.equal(plan.reboot, false);
  assert.deepEqual(plan.actions, [{ type: 'reload', unit: 'crio.service' }]);
  assert.equal(needsDrain(plan), false);
  assert.match(plan.decisions[0]!.rule, /^built-in policy \(MCO's Special\) files \/etc\/containers\/registries\.conf: .*safe.*: reload crio, no drain$/);
  assert.equal(plan.decisions[0]!.entry?.builtin, true);
});

test('registries.conf: a tag-only mirror, or a removal, reloads crio and drains', () => {
  const tag = planDisruption(diffSpecs(spec({ [REG]: base }), spec({ [REG]: tagMirror })), undefined);
  assert.deepEqual(tag.actions, [{ type: 'reload', unit: 'crio.service' }, { type: 'drain' }]);
  assert.equal(updateActionOf(tag), 'drain');
  assert.match(tag.decisions[0]!.rule, /registry quay\.io\/a has been added with a mirror that is not pull-from-mirror=digest-only: reload crio, drain$/);
  const removed = planDisruption(diffSpecs(spec({ [REG]: digestMirror }), spec({ [REG]: base })), undefined);
  assert.ok(needsDrain(removed));
  assert.match(removed.decisions[0]!.rule, /registry quay\.io\/a has been removed/);
});

test('policy.json reloads crio, the pull secret needs nothing, kubelet.conf and CRI-O drop-ins reboot', () => {
  const plan = planDisruption(diffSpecs(spec({}), spec({ '/etc/containers/policy.json': '{}', '/var/lib/kubelet/config.json': '{}' })), undefined);
  assert.equal(plan.reboot, false);
  assert.deepEqual(plan.actions, [{ type: 'reload', unit: 'crio.service' }]);
  assert.ok(plan.decisions.every((d) => d.rule.startsWith('built-in policy (MCO\'s default) files ')));
  for (const path of ['/etc/kubernetes/kubelet.conf', '/etc/crio/crio.conf.d/01-ctrcfg-pidsLimit']) {
    assert.equal(planDisruption(diffSpecs(spec({}), spec({ [path]: 'x' })), undefined).reboot, true, path);
  }
});

test('a MachineConfiguration entry for the same path overrides the built-in (MergeClusterPolicies)', () => {
  const plan = planDisruption(diffSpecs(spec({ [REG]: base }), spec({ [REG]: tagMirror })), { files: [{ path: REG, actions: [{ type: 'restart', unit: 'crio.service' }] }] });
  assert.deepEqual(plan.actions, [{ type: 'restart', unit: 'crio.service' }]);
  assert.equal(plan.decisions[0]!.entry?.builtin, undefined);
  assert.equal(plan.decisions[0]!.rule, `policy files ${REG}`);
});
