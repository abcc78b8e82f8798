// MCO's own table of drain decisions for registries.conf changes, ported case for case:
// machine-config-operator 7ff337a4, pkg/daemon/drain_test.go TestIsDrainRequired (the TOML texts
// are MCO's, byte for byte, tabs and trailing spaces included), deciding with pkg/daemon/drain.go's
// isDrainRequired / isSafeContainerRegistryConfChanges as ported in src/machineconfig/registries-drain.ts.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isDrainRequired } from '../../src/machineconfig/registries-drain.ts';

const REGISTRIES = '/etc/containers/registries.conf';
const machineConfigs: Record<string, string> = {
  mc1: "\nunqualified-search-registries = [\"example.com\", \"foo.com\"]\n\n[[registry]]\n  prefix = \"\"\n  location = \"example.com/repo/test-img\"\n\n  [[registry.mirror]]\n    location = \"mirror.com/repo/test-img\"\n\n[[registry]]\n  prefix = \"\"\n  location = \"example.com/repo1/test-img1\"\n\n  [[registry.mirror]]\n    location = \"mirror.com/repo1/test-img1\"\n\tpull-from-mirror= \"digest-only\"\t\t\t\t\n",
  mc2: "\nunqualified-search-registries = [\"example.com\", \"foo.com\"]\n\n[[registry]]\nprefix = \"\"\nlocation = \"example.com/repo/test-img\"\n\n[[registry.mirror]]\n\tlocation = \"mirror.com/repo/test-img\"\n\n[[registry]]\nprefix = \"\"\nlocation = \"example.com/repo1/test-img1\"\n\n[[registry.mirror]]\n\tlocation = \"mirror.com/repo1/test-img1\"\n\tpull-from-mirror = \"digest-only\"\n\n[[registry.mirror]]\n\tlocation = \"mirror1.com/repo1/test-img1\"\n\tpull-from-mirror = \"digest-only\"\n",
  mc3: "\nunqualified-search-registries = [\"example.com\", \"foo.com\"]\n\n[[registry]]\n\tprefix = \"\"\n\tlocation = \"example.com/repo/test-img\"\n\n\t[[registry.mirror]]\n\tlocation = \"mirror.com/repo/test-img\"\n",
  mc4: "\nunqualified-search-registries = [\"example.com\", \"foo.com\", \"bar.com\"]\n\n[[registry]]\n\tprefix = \"\"\n\tlocation = \"example.com/repo/test-img\"\n\n\t[[registry.mirror]]\n\tlocation = \"mirror.com/repo/test-img\"\n\tpull-from-mirror = \"digest-only\"\n",
  mc5: "\nunqualified-search-registries = [\"example.com\", \"foo.com\"]\n\n[[registry]]\n\tprefix = \"\"\n\tlocation = \"example.com/repo/test-img\"\n\n\t[[registry.mirror]]\n\tlocation = \"mirror.com/repo/test-img\"\n\tpull-from-mirror = \"digest-only\"\n",
  mc6: "\nunqualified-search-registries = [\"example.com\", \"foo.com\"]\n\n[[registry]]\nprefix = \"\"\nlocation = \"example.com/repo/test-img\"\n\n[[registry.mirror]]\nlocation = \"mirror.com/repo/test-img\"\npull-from-mirror = \"digest-only\"\n\n[[registry]]\nprefix = \"\"\nlocation = \"example.com/repo1/test-img1\"\n",
  mc7: "\nunqualified-search-registries = [\"example.com\", \"foo.com\"]\n\n[[registry]]\nprefix = \"\"\nlocation = \"example.com/repo/test-img\"\n\n[[registry.mirror]]\nlocation = \"mirror.com/repo/test-img\"\npull-from-mirror= \"digest-only\"\n\n[[registry]]\nprefix = \"\"\nlocation = \"example.com/repo1/test-img1\"\n\n[[registry.mirror]]\nlocation = \"mirror.com/repo1/test-img1\"\n",
  mc8: "\nunqualified-search-registries = [\"example.com\", \"foo.com\"]\n\n[[registry]]\nprefix = \"bar.com\"\nlocation = \"example.com/repo/test-img\"\n",
  mc9: "\nunqualified-search-registries = [\"example.com\", \"foo.com\"]\n\n[[registry]]\nprefix = \"bar.com\"\nlocation = \"example.com/repo/test-img\"\nblocked = true\n",
  mc10: "\nunqualified-search-registries = [\"example.com\", \"foo.com\"]\n\n[[registry]]\nprefix = \"\"\nlocation = \"example.com/repo/test-img\"\n",
  mc11: "\nunqualified-search-registries = [\"example.com\", \"foo.com\"]\n\n[[registry]]\nprefix = \"\"\nlocation = \"example.com/repo1/test-img\"\n\n[[registry.mirror]]\nlocation = \"mirror.com/repo1/test-img\"\npull-from-mirror= \"digest-only\"\n\n[[registry]]\nprefix = \"bar.com\"\nlocation = \"example.com/repo/test-img\"\nblocked = true\n",
  mc12: "\nunqualified-search-registries = [\"example.com\", \"foo.com\"]\n\n[[registry]]\nprefix = \"\"\nlocation = \"example.com/repo/test-img\"\nmirror-by-digest-only = true\n\n[[registry.mirror]]\nlocation = \"mirror.com/repo/test-img\"\n",
  mc13: "\nunqualified-search-registries = [\"example.com\", \"foo.com\"]\n\n[[registry]]\nprefix = \"\"\nlocation = \"example.com/repo/test-img\"\nmirror-by-digest-only = true\n\n[[registry.mirror]]\nlocation = \"mirror.com/repo/test-img\"\n[[registry.mirror]]\nlocation = \"mirror.com/repo/test-img-13\"\n",
  mc14: "\nunqualified-search-registries = [\"example.com\", \"foo.com\"]\n\n[[registry]]\nprefix = \"\"\nlocation = \"example.com/repo/test-img\"\nmirror-by-digest-only = true\n\n[[registry.mirror]]\nlocation = \"mirror.com/repo/test-img\"\n\n[[registry]]\nprefix = \"\"\nlocation = \"example.com/repo/test-img-14\"\nmirror-by-digest-only = false\n\n[[registry.mirror]]\nlocation = \"mirror.com/repo/test-img-14\"\n\n",
};

const cases: { name: string; actions: string[]; oldConfig: string; newConfig: string; expectedAction: boolean }[] = [
  { name: "skip drain: only None action is present", actions: ['none'], oldConfig: 'mc1', newConfig: 'mc1', expectedAction: false },
  { name: "perform drain: reboot action is present", actions: ['none', 'reboot'], oldConfig: 'mc1', newConfig: 'mc1', expectedAction: true },
  { name: "skip drain: no changes in registry config", actions: ['reload crio'], oldConfig: 'mc1', newConfig: 'mc1', expectedAction: false },
  { name: "skip drain: only new registry added with pull-from-mirror=digest-only", actions: ['reload crio'], oldConfig: 'mc3', newConfig: 'mc1', expectedAction: false },
  { name: "perform drain: only new registry added with mirror-by-digest-only set to false", actions: ['reload crio'], oldConfig: 'mc5', newConfig: 'mc6', expectedAction: true },
  { name: "perform drain: one or more registry has been removed", actions: ['reload crio'], oldConfig: 'mc1', newConfig: 'mc3', expectedAction: true },
  { name: "skip drain: only new mirrors got added to the registry with pull-from-mirror=digest-only", actions: ['reload crio'], oldConfig: 'mc1', newConfig: 'mc2', expectedAction: false },
  { name: "skip drain: only new mirrors are added to registry with pull-from-mirror=digest-only while existing registries with mirror-by-digest-only=false are unchanged", actions: ['reload crio'], oldConfig: 'mc9', newConfig: 'mc11', expectedAction: false },
  { name: "perform drain: only new mirrors got added to the registry with mirror-by-digest-only set to false for registry", actions: ['reload crio'], oldConfig: 'mc6', newConfig: 'mc7', expectedAction: true },
  { name: "perform drain: one or more mirror has been removed from a registry", actions: ['reload crio'], oldConfig: 'mc2', newConfig: 'mc1', expectedAction: true },
  { name: "perform drain: either item from unqualified-search-registries has been removed or ordering has been changed", actions: ['reload crio'], oldConfig: 'mc4', newConfig: 'mc3', expectedAction: true },
  { name: "skip drain: only additional unqualified-search-registries has been added", actions: ['reload crio'], oldConfig: 'mc3', newConfig: 'mc4', expectedAction: false },
  { name: "perform drain: prefix value of one or more registry has changed", actions: ['reload crio'], oldConfig: 'mc8', newConfig: 'mc10', expectedAction: true },
  { name: "perform drain: blocked value of one or more registry has changed", actions: ['reload crio'], oldConfig: 'mc8', newConfig: 'mc9', expectedAction: true },
  { name: "perform drain:  mirror-by-digest-only value of one or more registry has changed", actions: ['reload crio'], oldConfig: 'mc1', newConfig: 'mc6', expectedAction: true },
  { name: "skip drain: only new mirror added to registry with mirror-by-digest-only set to true", actions: ['reload crio'], oldConfig: 'mc12', newConfig: 'mc13', expectedAction: false },
];

cases.forEach((c, idx) => {
  test(`TestIsDrainRequired case#${idx}: ${c.name}`, () => {
    const oldText = machineConfigs[c.oldConfig]!;
    const newText = machineConfigs[c.newConfig]!;
    // CalculateConfigFileDiffs: the path is in the diff when its contents differ.
    const changed = oldText === newText ? [] : [REGISTRIES];
    const verdict = isDrainRequired(c.actions, changed, () => oldText, () => newText);
    assert.equal(verdict.drain, c.expectedAction, verdict.reason);
  });
});
