// mcctl and the agent make their clients without proto-loader (src/runtime/client-contract.ts says
// why), from protobufjs reflection when run from source and from code pbjs generated when
// bundled (scripts/static-coders.ts): with either, every method must reach the server as
// proto-loader's definition would, and read its answers the same way. Compared here method by
// method, on messages with every field set.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { loadMcplaneProto } from '../../src/runtime/proto.ts';
import { serviceDefinition } from '../../src/runtime/client-contract.ts';
import { loadRoot, serviceMethods, type ServiceMethod } from '../../src/runtime/message-coders.ts';
import { generateStaticCoders } from '../../scripts/static-coders.ts';
import { REPO_ROOT } from '../helpers/run-cli.ts';
import type protobuf from 'protobufjs';

const SERVICES = ['StatusService', 'ConfigService', 'IdentityService', 'AgentService'];

/** An object of `type` with every field set (one member per oneof), nested two levels down. */
function sample(type: protobuf.Type, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const oneofTaken = new Set<string>();
  for (const field of type.fieldsArray) {
    field.resolve();
    if (field.partOf) {
      if (oneofTaken.has(field.partOf.name)) continue;
      oneofTaken.add(field.partOf.name);
    }
    const value = scalar(field, depth);
    if (value === undefined) continue;
    if (field.map) out[field.name] = { k: value };
    else out[field.name] = field.repeated ? [value, value] : value;
  }
  return out;
}

function scalar(field: protobuf.Field, depth: number): unknown {
  const resolved = field.resolvedType;
  if (resolved && 'values' in resolved) return Object.keys((resolved as protobuf.Enum).values).at(-1);
  if (resolved) return depth < 2 ? sample(resolved as protobuf.Type, depth + 1) : undefined;
  switch (field.type) {
    case 'string': return `${field.name}-value`;
    case 'bool': return true;
    case 'bytes': return Buffer.from('bytes');
    case 'double': case 'float': return 1.5;
    default: return 7;
  }
}

/** Every method of every service, as proto-loader defines it, against the definitions `methodsOf` gives. */
function assertAsProtoLoader(methodsOf: (fullName: string) => ServiceMethod[]): void {
  const loader = loadMcplaneProto().definition;
  const root = loadRoot();
  let methods = 0;
  for (const name of SERVICES) {
    const fullName = `mcplane.v1.${name}`;
    const ours = serviceDefinition(fullName, methodsOf(fullName));
    const theirs = loader[fullName] as unknown as Record<string, Record<string, unknown> & { requestSerialize(v: unknown): Buffer; responseSerialize(v: unknown): Buffer; requestDeserialize(b: Buffer): unknown; responseDeserialize(b: Buffer): unknown }>;
    assert.deepEqual(Object.keys(ours).sort(), Object.keys(theirs).sort(), name);
    for (const [method, def] of Object.entries(ours)) {
      const other = theirs[method]!;
      for (const key of ['path', 'requestStream', 'responseStream', 'originalName'] as const) assert.equal(def[key], other[key], `${name}.${method} ${key}`);
      const rpc = root.lookupService(fullName).methods[method]!;
      rpc.resolve();
      for (const [side, type] of [['request', rpc.resolvedRequestType!], ['response', rpc.resolvedResponseType!]] as const) {
        const value = sample(type);
        const serialize = side === 'request' ? def.requestSerialize : def.responseSerialize;
        const deserialize = side === 'request' ? def.requestDeserialize : def.responseDeserialize;
        const bytes = (side === 'request' ? other.requestSerialize : other.responseSerialize)(value);
        assert.deepEqual(serialize(value), bytes, `${name}.${method} ${side} encoding`);
        assert.deepEqual(deserialize(bytes), (side === 'request' ? other.requestDeserialize : other.responseDeserialize)(bytes), `${name}.${method} ${side} decoding`);
        assert.ok(bytes.length > 0 || type.fieldsArray.length === 0, `${name}.${method} ${side}: the sample sets fields`);
      }
      methods++;
    }
  }
  assert.equal(methods, 30, 'every rpc of the contract');
}

test('the client contract from source (protobufjs reflection): every method as proto-loader defines it (path, streaming, names, encoding both ways)', () => {
  assertAsProtoLoader(serviceMethods);
});

test('the client contract of the bundles (code pbjs generated at build time): every method as proto-loader defines it', async () => {
  // Bundled as scripts/build.ts bundles it: esbuild resolves protobufjs/minimal from node_modules.
  const bundled = await build({ stdin: { contents: await generateStaticCoders(), resolveDir: REPO_ROOT, loader: 'js' }, bundle: true, platform: 'node', format: 'esm', write: false, logLevel: 'error' });
  const dir = mkdtempSync(join(tmpdir(), 'static-coders-'));
  try {
    const file = join(dir, 'coders.mjs');
    writeFileSync(file, bundled.outputFiles[0]!.text);
    const generated = await import(pathToFileURL(file).href) as { serviceMethods(fullName: string): ServiceMethod[] };
    assertAsProtoLoader(generated.serviceMethods);
    assert.throws(() => generated.serviceMethods('mcplane.v1.NoSuchService'), /mcplane\.v1\.NoSuchService is not a service of the mcplane contract/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
