// The layout is the architecture (docs/ARCHITECTURE.md): these tests read every import in src/
// and fail on one that points the wrong way, so the layering cannot erode unnoticed.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';
import { API_KIND_NAMES, SOURCE_KINDS } from '../../src/machineconfig/api-kinds.ts';
import { STORED_KINDS } from '../../src/controlplane/store/kinds.ts';
import { REPO_ROOT } from '../helpers/run-cli.ts';

const SRC = join(REPO_ROOT, 'src');

/** Every relative import of every .ts file under src/, as [importer, imported], both relative to src/. */
function imports(): [string, string][] {
  const edges: [string, string][] = [];
  for (const entry of readdirSync(SRC, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const file = join(entry.parentPath, entry.name);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+'(\.[^']+)'/gms)) {
      edges.push([relative(SRC, file), relative(SRC, resolve(dirname(file), m[1]!))]);
    }
  }
  return edges;
}

const top = (path: string): string => path.split('/')[0]!;

test('src/machineconfig is pure and shared; controlplane, agent and cli never import each other', () => {
  const allowed: Record<string, string[]> = {
    machineconfig: ['machineconfig'],
    runtime: ['runtime', 'machineconfig'],
    controlplane: ['controlplane', 'machineconfig', 'runtime'],
    agent: ['agent', 'machineconfig', 'runtime'],
    cli: ['cli', 'machineconfig', 'runtime'],
  };
  const wrong = imports().filter(([from, to]) => allowed[top(from)] && !allowed[top(from)]!.includes(top(to)));
  assert.deepEqual(wrong.map(([f, t]) => `${f} -> ${t}`), []);
  const pureModules = ['node:fs', 'node:child_process', 'node:net', 'node:http', 'node:http2', '@grpc/grpc-js'];
  for (const entry of readdirSync(join(SRC, 'machineconfig'), { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const text = readFileSync(join(entry.parentPath, entry.name), 'utf8');
    for (const m of pureModules) assert.ok(!text.includes(`from '${m}'`), `${entry.name} imports ${m}: src/machineconfig does no I/O`);
  }
});

/** The control plane's layers, bottom up; a file may import its own layer and those below. */
const LAYERS: string[][] = [
  ['store'],
  ['cache'],
  ['replica', 'metrics'],
  ['sessions', 'kubernetes'],
  ['controllers'],
  ['control-plane.ts', 'drain-observers.ts'],
  ['api'],
  ['server.ts', 'backup-command.ts'],
  ['main.ts'],
];

function layerOf(path: string): number {
  const part = path.split('/')[1]!;
  const i = LAYERS.findIndex((l) => l.includes(part));
  assert.notEqual(i, -1, `src/${path} is in no layer of this test: add its folder to LAYERS, where it belongs`);
  return i;
}

test('src/controlplane: no import points from a lower layer to a higher one', () => {
  const up = imports()
    .filter(([from, to]) => top(from) === 'controlplane' && top(to) === 'controlplane')
    .filter(([from, to]) => layerOf(to) > layerOf(from));
  assert.deepEqual(up.map(([f, t]) => `${f} -> ${t}`), []);
});

test('src/controlplane/api: services take the parts they use (api-access.ts), not the ControlPlane', () => {
  const reaching = imports()
    .filter(([from, to]) => from.startsWith('controlplane/api/') && to === 'controlplane/control-plane.ts')
    .map(([from]) => from);
  // api-access.ts names the commands by ControlPlane's method signatures; no service imports it.
  assert.deepEqual(reaching, ['controlplane/api/api-access.ts']);
});

/** The import cycles of `edges`: each as its files in order, the first one repeated last. */
function cycles(edges: [string, string][]): string[][] {
  const next = new Map<string, string[]>();
  for (const [from, to] of edges) next.set(from, [...(next.get(from) ?? []), to]);
  const found: string[][] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (file: string): void => {
    const at = path.indexOf(file);
    if (at !== -1) {
      found.push([...path.slice(at), file]);
      return;
    }
    if (done.has(file)) return;
    path.push(file);
    for (const to of next.get(file) ?? []) visit(to);
    path.pop();
    done.add(file);
  };
  for (const file of next.keys()) visit(file);
  return found;
}

test('src/machineconfig has no import cycles, type imports included', () => {
  const inside = imports().filter(([from, to]) => top(from) === 'machineconfig' && top(to) === 'machineconfig');
  assert.deepEqual(cycles(inside).map((c) => c.join(' -> ')), []);
});

test('src/controlplane: the API imports no controller, and no controller imports another', () => {
  // What a controller and the API both need (what the generator wants, a pool's status now) is
  // computed from the cache, and lives in cache/: a controller is the leader's writer alone.
  const controllerFile = (path: string): boolean => /^controlplane\/controllers\/.*-controller\.ts$/.test(path);
  const wrong = imports().filter(([from, to]) =>
    (from.startsWith('controlplane/api/') && to.startsWith('controlplane/controllers/')) ||
    (controllerFile(from) && controllerFile(to)));
  assert.deepEqual(wrong.map(([f, t]) => `${f} -> ${t}`), []);
});

test("an Apply's manifests are read in one place, once per request", () => {
  /** The files of src/ whose code calls `name`, each with how many times. */
  const callers = (name: string): string[] => {
    const found: string[] = [];
    for (const entry of readdirSync(SRC, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
      const file = join(entry.parentPath, entry.name);
      const calls = readFileSync(file, 'utf8').split('\n').filter((line) => !/^\s*(\/\/|\*)/.test(line) && !/\bfunction\s/.test(line))
        .join('\n').match(new RegExp(`\\b${name}\\(`, 'g'))?.length ?? 0;
      if (calls) found.push(`${relative(SRC, file)} (${calls})`);
    }
    return found.sort();
  };
  // The server reads YAML text in parseApplyRequest alone (the CLI reads its files itself); the
  // Apply handler calls it once, and stores, warns and previews from what it returns.
  assert.deepEqual(callers('readDocuments').filter((f) => !f.startsWith('cli/')), ['machineconfig/apply-request.ts (1)', 'machineconfig/manifest.ts (1)']);
  assert.deepEqual(callers('parseApplyRequest'), ['controlplane/api/config-service.ts (1)']);
});

/**
 * Lists of API kinds written outside the catalogue (src/machineconfig/api-kinds.ts): every array
 * literal, object literal's keys and union type in src/ holding two or more of the catalogue's
 * kind names as string literals, where the list is of API kinds (no stored kind of the control
 * plane's own is in it) or holds two or more higher-level configs. A list of stored kinds for a
 * purpose (the records a pool's nodes are made of, say) names control-plane kinds too and passes.
 */
export function kindListsOutsideCatalogue(srcRoot: string, apiKinds: readonly string[], sourceKinds: readonly string[], storedKinds: readonly string[]): string[] {
  const api = new Set(apiKinds);
  const sources = new Set(sourceKinds);
  const controlPlaneOnly = new Set(storedKinds.filter((k) => !api.has(k)));
  const files = readdirSync(srcRoot, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.parentPath.includes('/generated'))
    .map((e) => join(e.parentPath, e.name));
  // Constants naming a kind (KIND_KUBELET_CONFIG = 'KubeletConfig') count as the kind's name.
  const constants = new Map<string, string>();
  for (const file of files) {
    for (const m of readFileSync(file, 'utf8').matchAll(/^export const (\w+) = '(\w+)';/gm)) if (api.has(m[2]!)) constants.set(m[1]!, m[2]!);
  }
  const nameOf = (e: ts.Node): string[] => {
    if (ts.isStringLiteralLike(e)) return [e.text];
    if (ts.isIdentifier(e) && constants.has(e.text)) return [constants.get(e.text)!];
    // An array of objects each naming its kind ([{ kind: 'Image', ... }, ...]).
    if (ts.isObjectLiteralExpression(e)) return e.properties.flatMap((p) => (ts.isPropertyAssignment(p) && p.name.getText() === 'kind' ? nameOf(p.initializer) : []));
    return [];
  };
  const found: string[] = [];
  for (const file of files) {
    const path = relative(srcRoot, file);
    if (path === join('machineconfig', 'api-kinds.ts')) continue;
    const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const visit = (n: ts.Node): void => {
      let names: string[] = [];
      if (ts.isArrayLiteralExpression(n)) names = n.elements.flatMap(nameOf);
      else if (ts.isObjectLiteralExpression(n)) {
        // Keys and values: { KubeletConfig: ... } and { kubeletconfigs: 'KubeletConfig' } both list kinds.
        names = n.properties.flatMap((p) => [
          ...(p.name && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name)) ? [p.name.text] : []),
          ...(ts.isPropertyAssignment(p) && p.name.getText() !== 'kind' ? nameOf(p.initializer) : []),
        ]);
      } else if (ts.isUnionTypeNode(n)) names = n.types.flatMap((t) => (ts.isLiteralTypeNode(t) && ts.isStringLiteral(t.literal) ? [t.literal.text] : []));
      const kinds = new Set(names.filter((x) => api.has(x)));
      const sourcesNamed = [...kinds].filter((k) => sources.has(k)).length;
      if (sourcesNamed >= 2 || (kinds.size >= 2 && !names.some((x) => controlPlaneOnly.has(x)))) {
        found.push(`${path}:${sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1}: ${[...kinds].join(', ')}`);
      }
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return found;
}

/** Lists that name kinds for another reason than being the catalogue's, with that reason. */
const KIND_LISTS_ALLOWED: Record<string, string> = {
  'cli/events.ts': 'an event names its object node/NAME or pool/NAME: the map reads that prefix',
};

test('API kinds are listed in one place: the catalogue (src/machineconfig/api-kinds.ts); everything else derives its lists from it', () => {
  const found = kindListsOutsideCatalogue(SRC, API_KIND_NAMES, SOURCE_KINDS, STORED_KINDS);
  assert.deepEqual(found.filter((f) => !Object.hasOwn(KIND_LISTS_ALLOWED, f.split(':')[0]!)), []);
});
