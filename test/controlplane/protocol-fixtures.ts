// What the mixed-version tests share: the recorded protocol fixtures (test/fixtures/protocol/
// <version>/, written by scripts/record-protocol-fixture.ts at release time), loaded with their own
// proto snapshot, and the wire-compatibility rules a newer proto must keep against an older one.

import { loadPackageDefinition, type GrpcObject } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import protobuf from 'protobufjs';
import { LOADER_OPTIONS, PROTO_FILES } from '../../src/runtime/proto.ts';

export const FIXTURES_DIR = join(import.meta.dirname, '..', 'fixtures', 'protocol');
export const TODAY_PROTO_DIR = join(import.meta.dirname, '..', '..', 'proto');

export interface RecordedMessage {
  /** Which agent stream (1: the first; 2: the one the renewed certificate opened). */
  stream: number;
  from: 'agent' | 'server';
  /** The oneof case: register, status, heartbeat, renew; registered, assignment, command, certificate. */
  kind: string;
  /**
   * protobufjs toObject of the message under the fixture's own schema (camelCase, as proto-loader
   * reads and writes it); untyped, since it follows an older schema than the generated types.
   */
  json: Record<string, any>;
  /** The bytes on the wire, base64. */
  wire: string;
}

export interface ProtocolFixture {
  version: string;
  dir: string;
  protoDir: string;
  node: string;
  /** The rendered configs of the flow: the first assignment's, then the second's. */
  configs: string[];
  agentKinds: string[];
  serverKinds: string[];
  messages: RecordedMessage[];
  /** The pool and the two MachineConfigs the flow applied, in order. */
  manifests: string[];
}

/** Every recorded fixture, oldest version first. */
export function protocolFixtures(): ProtocolFixture[] {
  const versions = readdirSync(FIXTURES_DIR).filter((v) => existsSync(join(FIXTURES_DIR, v, 'agent-streams.json')));
  versions.sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  return versions.map((v) => {
    const dir = join(FIXTURES_DIR, v);
    const recorded = JSON.parse(readFileSync(join(dir, 'agent-streams.json'), 'utf8')) as Omit<ProtocolFixture, 'dir' | 'protoDir' | 'manifests'>;
    return { ...recorded, dir, protoDir: join(dir, 'proto'), manifests: readFileSync(join(dir, 'manifests.yaml'), 'utf8').split(/^---\n/m) };
  });
}

/** The gRPC services of a proto directory, as @grpc/proto-loader builds clients and servers from it. */
export function loadGrpc(protoDir: string): { mcplane: { v1: Record<string, GrpcObject[string]> } } {
  return loadPackageDefinition(loadSync(PROTO_FILES, { ...LOADER_OPTIONS, includeDirs: [protoDir] })) as unknown as { mcplane: { v1: Record<string, GrpcObject[string]> } };
}

/** A protobufjs Root of a proto directory (for reflection and exact decoding). */
export function loadRoot(protoDir: string): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(protoDir, target);
  root.loadSync(PROTO_FILES);
  root.resolveAll();
  return root;
}

/** A protobufjs Root from proto texts by file name (mcplane/v1/x.proto), for mutated copies. */
export function rootFromTexts(files: Record<string, string>): protobuf.Root {
  const root = new protobuf.Root();
  // types.proto first: the others import it (the imports themselves are not followed).
  const names = Object.keys(files).sort((a, b) => Number(b.endsWith('types.proto')) - Number(a.endsWith('types.proto')));
  for (const name of names) protobuf.parse(files[name]!, root, { keepCase: true });
  root.resolveAll();
  return root;
}

export function protoTexts(protoDir: string): Record<string, string> {
  const dir = join(protoDir, 'mcplane', 'v1');
  return Object.fromEntries(readdirSync(dir).filter((f) => f.endsWith('.proto')).map((f) => [`mcplane/v1/${f}`, readFileSync(join(dir, f), 'utf8')]));
}

function* typesOf(ns: protobuf.NamespaceBase): Generator<protobuf.Type | protobuf.Enum | protobuf.Service> {
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Type || nested instanceof protobuf.Enum || nested instanceof protobuf.Service) yield nested;
    if (nested instanceof protobuf.Namespace || nested instanceof protobuf.Type) yield* typesOf(nested);
  }
}

/** A field's wire shape: its type (fully qualified for messages and enums), label and map key. */
function shapeOf(field: protobuf.Field): string {
  const type = field.resolvedType ? field.resolvedType.fullName.replace(/^\./, '') : field.type;
  if (field instanceof protobuf.MapField) return `map<${field.keyType}, ${type}>`;
  return `${field.repeated ? 'repeated ' : ''}${type}`;
}

function isReserved(reserved: (number[] | string)[] | undefined, key: number | string): boolean {
  return (reserved ?? []).some((r) => (typeof r === 'string' ? r === key : typeof key === 'number' && key >= r[0]! && key <= r[1]!));
}

/**
 * What in `next` breaks a peer built from `previous`, by buf's WIRE_JSON rules (binary and JSON
 * encodings): a message, enum, service or method removed; a field number reused with another
 * type, label, name or oneof; a field removed without reserving its number and its name; an enum
 * number given another name or removed without reserving it; a method's request, response or
 * streaming changed. Stricter than buf in one way: a type change that happens to be
 * wire-compatible (int32 to int64) is reported too; mcplane has no reason to make one.
 */
export function breakingChanges(previous: protobuf.Root, next: protobuf.Root): string[] {
  const problems: string[] = [];
  for (const old of typesOf(previous)) {
    const name = old.fullName.replace(/^\./, '');
    const now = next.lookup(old.fullName);
    if (!now || now.constructor !== old.constructor) {
      problems.push(`${name}: removed (peers built from the older proto still send and expect it)`);
      continue;
    }
    if (old instanceof protobuf.Type) {
      const type = now as protobuf.Type;
      for (const field of old.fieldsArray) {
        const where = `${name}.${field.name} = ${field.id}`;
        const same = type.fieldsById[field.id];
        if (!same) {
          const renumbered = type.fields[field.name];
          if (renumbered) {
            problems.push(`${where}: renumbered to ${renumbered.id} (peers built from the older proto send and read it as ${field.id})`);
            continue;
          }
          if (!isReserved(type.reserved, field.id)) problems.push(`${where}: field number ${field.id} removed without \`reserved ${field.id};\` (a later field could reuse it with another meaning)`);
          if (!isReserved(type.reserved, field.name)) problems.push(`${where}: field name ${field.name} removed without \`reserved "${field.name}";\` (JSON peers still send it)`);
          continue;
        }
        if (shapeOf(same) !== shapeOf(field)) problems.push(`${where}: type changed from ${shapeOf(field)} to ${shapeOf(same)}`);
        if (same.name !== field.name) problems.push(`${where}: field number ${field.id} renamed to ${same.name} (JSON peers still use ${field.name})`);
        if ((same.partOf?.name ?? '') !== (field.partOf?.name ?? '')) problems.push(`${where}: moved from oneof ${field.partOf?.name ?? '(none)'} to ${same.partOf?.name ?? '(none)'}`);
      }
    } else if (old instanceof protobuf.Enum) {
      const en = now as protobuf.Enum;
      for (const [valueName, id] of Object.entries(old.values)) {
        const nowName = en.valuesById[id];
        if (nowName === undefined) {
          if (!isReserved(en.reserved, id)) problems.push(`${name}.${valueName} = ${id}: enum number removed without reserving it`);
        } else if (nowName !== valueName) {
          problems.push(`${name}.${valueName} = ${id}: enum number ${id} renamed to ${nowName} (JSON peers send the name)`);
        }
      }
    } else {
      const service = now as protobuf.Service;
      for (const method of old.methodsArray) {
        const where = `${name}.${method.name}`;
        const same = service.methods[method.name];
        if (!same) {
          problems.push(`${where}: method removed`);
          continue;
        }
        same.resolve();
        method.resolve();
        const sig = (m: protobuf.Method) => `${m.requestStream ? 'stream ' : ''}${m.resolvedRequestType!.fullName} -> ${m.responseStream ? 'stream ' : ''}${m.resolvedResponseType!.fullName}`;
        if (sig(same) !== sig(method)) problems.push(`${where}: signature changed from (${sig(method)}) to (${sig(same)})`);
      }
    }
  }
  return problems;
}
