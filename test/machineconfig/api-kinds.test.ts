// The lists each layer reads are derived from the one kind catalogue (api-kinds.ts): each is
// checked against the catalogue rather than against a copy of it, plus a few facts that must
// hold whatever the catalogue says (kubectl's short names, MCO's plurals and groups).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { API_KIND_NAMES, API_KINDS, apiVersionOf, DERIVED_KINDS, IMPORTED_KINDS, SOURCE_KINDS, type ApiKindInfo } from '../../src/machineconfig/api-kinds.ts';
import { REPO_ROOT } from '../helpers/run-cli.ts';
import { manifestFromClusterObject, SOURCE_RESOURCES } from '../../src/machineconfig/cluster-object.ts';
import { isSourceKind, parseSourceObject } from '../../src/machineconfig/generated-configs.ts';
import { ProblemCollector } from '../../src/machineconfig/problem-collector.ts';
import { KINDS, CACHED_KINDS } from '../../src/controlplane/store/kinds.ts';
import { SOURCE_STORED_KINDS } from '../../src/controlplane/cache/cluster-cache.ts';
import { ALIASES, API_KIND_RESOURCES, kindOfResource, RESOURCES, resourceOf, SOURCE_RESOURCE_KINDS } from '../../src/cli/resources.ts';

const info = (kind: string): ApiKindInfo => API_KINDS[kind as keyof typeof API_KINDS];

test('the higher-level configs are the catalogue entries marked source, in its order, in every layer', () => {
  const marked = API_KIND_NAMES.filter((k) => info(k).source === true);
  assert.deepEqual([...SOURCE_KINDS], marked);
  assert.deepEqual([...SOURCE_STORED_KINDS], marked);
  assert.deepEqual(SOURCE_RESOURCES.map((r) => r.kind), marked);
  assert.deepEqual(Object.values(SOURCE_RESOURCE_KINDS), marked);
  for (const k of marked) assert.ok(isSourceKind(k), k);
  assert.ok(!isSourceKind('MachineConfig') && !isSourceKind('toString'));
});

test('import reads each kind where the catalogue says a cluster serves it, and gives it that apiVersion', () => {
  for (const r of SOURCE_RESOURCES) {
    const k = info(r.kind);
    assert.deepEqual({ group: r.group, version: r.version, plural: r.plural }, { group: k.group, version: k.version, plural: k.plural }, r.kind);
  }
  for (const kind of IMPORTED_KINDS) {
    assert.equal(manifestFromClusterObject(kind, { metadata: { name: 'x' } }).apiVersion, apiVersionOf(kind), kind);
  }
  assert.deepEqual(IMPORTED_KINDS, API_KIND_NAMES.filter((k) => info(k).imported === true));
  for (const kind of DERIVED_KINDS) assert.ok(!(IMPORTED_KINDS as readonly string[]).includes(kind), `${kind} is derived: import compares it, never applies it`);
});

test('the store keeps every kind users write, as the catalogue describes it, cached; a derived kind is not stored', () => {
  for (const kind of API_KIND_NAMES) {
    if (info(kind).derived) {
      assert.ok(!Object.hasOwn(KINDS, kind), `${kind} is derived, not stored`);
      assert.equal(info(kind).parse, undefined, `${kind}: nobody writes it, so nothing parses it`);
      assert.equal(info(kind).deleteRule, undefined, `${kind}: nothing stored to delete`);
      continue;
    }
    const stored = KINDS[kind as keyof typeof KINDS];
    assert.ok(stored, `${kind} is a stored kind`);
    assert.equal(stored.writer, info(kind).writer, kind);
    assert.equal(stored.holds, info(kind).holds, kind);
    if (info(kind).writer === 'user') assert.ok((CACHED_KINDS as readonly string[]).includes(kind), `${kind} is cached`);
  }
});

test('each source kind is validated by its catalogue parser', () => {
  for (const kind of SOURCE_KINDS) {
    const c = new ProblemCollector(`${kind}/x`, 'test');
    parseSourceObject({ apiVersion: apiVersionOf(kind), kind, metadata: { name: 'x' }, spec: 'not an object' }, c);
    const direct = new ProblemCollector(`${kind}/x`, 'test');
    info(kind).parse!({ apiVersion: apiVersionOf(kind), kind, metadata: { name: 'x' }, spec: 'not an object' }, direct);
    assert.deepEqual(c.problems, direct.problems, kind);
    assert.ok(c.problems.length > 0, `${kind}: a string spec is refused`);
  }
});

test("mcctl knows every listed kind by its kind, plural and short names, and deletes it as that kind", () => {
  for (const [kind, resource] of Object.entries(API_KIND_RESOURCES) as [keyof typeof API_KINDS, NonNullable<(typeof API_KIND_RESOURCES)[keyof typeof API_KINDS]>][]) {
    const k = info(kind);
    for (const alias of [kind.toLowerCase(), k.plural, ...k.shortNames]) assert.equal(resourceOf(alias), resource, `${alias} -> ${resource}`);
    assert.ok(RESOURCES[resource], `mcctl get ${resource}`);
    assert.equal(kindOfResource(resource), kind);
  }
  // Every higher-level config and every kind with its own mcctl name is listed; nothing else of the catalogue.
  assert.deepEqual(Object.keys(API_KIND_RESOURCES).sort(), API_KIND_NAMES.filter((k) => info(k).source || info(k).mcctlName).sort());
  // An alias leads to a resource that exists.
  for (const [alias, r] of Object.entries(ALIASES)) assert.ok(RESOURCES[r], `${alias} -> ${r}`);
});

test('known facts: the names kubectl and MCO use', () => {
  assert.equal(resourceOf('mc'), 'mc');
  assert.equal(kindOfResource(resourceOf('mc')), 'MachineConfig');
  assert.equal(kindOfResource(resourceOf('mcp')), 'MachineConfigPool');
  assert.equal(kindOfResource(resourceOf('ctrcfg')), 'ContainerRuntimeConfig');
  assert.equal(kindOfResource(resourceOf('idms')), 'ImageDigestMirrorSet');
  assert.equal(kindOfResource(resourceOf('icsp')), 'ImageContentSourcePolicy');
  assert.equal(API_KINDS.KubeletConfig.plural, 'kubeletconfigs');
  assert.equal(API_KINDS.ImageContentSourcePolicy.plural, 'imagecontentsourcepolicies');
  assert.equal(apiVersionOf('KubeletConfig'), 'machineconfiguration.openshift.io/v1');
  assert.equal(apiVersionOf('ImageContentSourcePolicy'), 'operator.openshift.io/v1alpha1');
  assert.equal(apiVersionOf('ClusterImagePolicy'), 'config.openshift.io/v1');
  assert.equal(apiVersionOf('MachineConfiguration'), 'operator.openshift.io/v1');
  assert.equal(API_KINDS.Node.deleteRule, 'node');
  // openshift/api machineconfiguration/v1 types_pinnedimageset.go: path=pinnedimagesets, no short name.
  assert.equal(apiVersionOf('PinnedImageSet'), 'machineconfiguration.openshift.io/v1');
  assert.equal(API_KINDS.PinnedImageSet.plural, 'pinnedimagesets');
  assert.deepEqual(API_KINDS.PinnedImageSet.shortNames, []);
  assert.equal(kindOfResource(resourceOf('pinnedimageset')), 'PinnedImageSet');
  assert.ok(IMPORTED_KINDS.includes('PinnedImageSet'));
  assert.equal(kindOfResource('rendered'), undefined);
});

/**
 * String literals in src/ (outside the catalogue) that are one of a derived kind's names: its
 * plural, its short names, its lower-case kind or its mcctl name. The control plane and mcctl
 * take them from the entry (a derived kind is served by hand-written code in
 * each layer, so this is where a copy would creep in).
 */
export function derivedKindNamesOutsideCatalogue(srcRoot: string): string[] {
  const names = new Map<string, string>();
  for (const kind of DERIVED_KINDS) {
    const k = info(kind);
    for (const n of [k.plural, ...k.shortNames, kind.toLowerCase(), ...(k.mcctlName ? [k.mcctlName] : [])]) names.set(n, kind);
  }
  const found: string[] = [];
  for (const e of readdirSync(srcRoot, { recursive: true, withFileTypes: true })) {
    if (!e.isFile() || !e.name.endsWith('.ts') || e.parentPath.includes('/generated')) continue;
    const file = join(e.parentPath, e.name);
    const path = relative(srcRoot, file);
    if (path === join('machineconfig', 'api-kinds.ts')) continue;
    const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const visit = (n: ts.Node): void => {
      // A literal, or a property key ({ mcn: ... }): both name the resource.
      const text = ts.isStringLiteralLike(n) ? n.text : (ts.isPropertyAssignment(n) || ts.isShorthandPropertyAssignment(n)) && ts.isIdentifier(n.name) ? n.name.text : undefined;
      if (text !== undefined && names.has(text)) found.push(`${path}:${sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1}: ${JSON.stringify(text)} (${names.get(text)})`);
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return found;
}

test("MachineConfigNode is a derived catalogue kind, and its names are written nowhere but the catalogue", () => {
  assert.deepEqual([...DERIVED_KINDS], ['MachineConfigNode']);
  const mcn = info('MachineConfigNode');
  // openshift/api machineconfiguration/v1 types_machineconfignode.go: path=machineconfignodes, shortName=mcn.
  assert.deepEqual({ apiVersion: apiVersionOf('MachineConfigNode'), plural: mcn.plural, shortNames: mcn.shortNames }, { apiVersion: 'machineconfiguration.openshift.io/v1', plural: 'machineconfignodes', shortNames: ['mcn'] });
  assert.equal(mcn.writer, 'control plane');
  assert.equal(mcn.imported, 'compared');
  for (const alias of ['mcn', 'machineconfignode', 'machineconfignodes', 'MachineConfigNodes']) assert.equal(kindOfResource(resourceOf(alias)), 'MachineConfigNode', alias);
  assert.deepEqual(derivedKindNamesOutsideCatalogue(join(REPO_ROOT, 'src')), []);
});

test('the derived-names check finds a copy: a file naming "machineconfignodes" by hand', async () => {
  const { mkdtempSync, writeFileSync, mkdirSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const root = mkdtempSync(join(tmpdir(), 'derived-names-'));
  mkdirSync(join(root, 'cli'));
  writeFileSync(join(root, 'cli', 'x.ts'), "const PLURAL = 'machineconfignodes';\nexport const A = { mcn: 1, other: 'mc' };\n");
  assert.deepEqual(derivedKindNamesOutsideCatalogue(root), ['cli/x.ts:1: "machineconfignodes" (MachineConfigNode)', 'cli/x.ts:2: "mcn" (MachineConfigNode)']);
});
