// The clients' view of the mcplane.v1 contract (mcctl's, the agent's): a client constructor per
// service, made from protobufjs directly. @grpc/proto-loader (runtime/proto.ts, for the server)
// also builds every message's descriptor and encodes every file's for reflection, which a client
// never serves: that was a third of `mcctl get pools`'s start-up, and a part of every agent
// start. What a call sees is the same: each method's path, streaming, and serialization are
// proto-loader's (its createSerializer, createDeserializer with LOADER_OPTIONS),
// test/cli/client-contract.test.ts compares them.

import { makeClientConstructor, type MethodDefinition, type ServiceDefinition } from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LOADER_OPTIONS, PARSED_PROTO_FILE, PROTO_FILES, protoDir } from './proto-files.ts';
import type { McplaneGrpc } from './proto.ts';

type V1 = McplaneGrpc['mcplane']['v1'];
export interface ClientContract {
  StatusService: V1['StatusService'];
  ConfigService: V1['ConfigService'];
  IdentityService: V1['IdentityService'];
  AgentService: V1['AgentService'];
}

const SERVICES = ['StatusService', 'ConfigService', 'IdentityService', 'AgentService'] as const;

let cached: ClientContract | undefined;

/**
 * Each service's constructor is made when first read: resolving a service's methods generates its
 * messages' coders, and the agent uses one service of four, `mcctl get pools` one.
 */
export function loadClientContract(): ClientContract {
  if (!cached) {
    const root = loadRoot();
    const made = new Map<string, unknown>();
    const contract = {};
    for (const name of SERVICES) {
      Object.defineProperty(contract, name, {
        enumerable: true,
        get() {
          if (!made.has(name)) made.set(name, makeClientConstructor(serviceDefinition(root, `mcplane.v1.${name}`), name));
          return made.get(name);
        },
      });
    }
    cached = contract as ClientContract;
  }
  return cached;
}

/** The service as proto-loader's createServiceDefinition makes it, less the reflection parts. */
export function serviceDefinition(root: protobuf.Root, fullName: string): ServiceDefinition {
  const service = root.lookupService(fullName);
  const definition: Record<string, MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methodsArray) {
    method.resolve();
    const request = method.resolvedRequestType!;
    const response = method.resolvedResponseType!;
    definition[method.name] = {
      path: `/${fullName}/${method.name}`,
      requestStream: !!method.requestStream,
      responseStream: !!method.responseStream,
      requestSerialize: serializer(request),
      requestDeserialize: deserializer(request),
      responseSerialize: serializer(response),
      responseDeserialize: deserializer(response),
      // lodash.camelcase, as proto-loader names it; the contract's method names are PascalCase words.
      originalName: method.name.charAt(0).toLowerCase() + method.name.slice(1),
    };
  }
  return definition as ServiceDefinition;
}

function serializer(type: protobuf.Type): (value: unknown) => Buffer {
  return (value) => {
    if (Array.isArray(value)) throw new Error(`Failed to serialize message: expected object with ${type.name} structure, got array instead`);
    return type.encode(type.fromObject(value as Record<string, unknown>)).finish() as Buffer;
  };
}

function deserializer(type: protobuf.Type): (bytes: Buffer) => unknown {
  return (bytes) => type.toObject(type.decode(bytes), LOADER_OPTIONS as protobuf.IConversionOptions);
}

/**
 * The contract parsed at build time beside the bundle (scripts/build.ts); from source, the .proto
 * files, read as build.ts reads them (protobufjs carries the google/protobuf ones).
 */
export function loadRoot(): protobuf.Root {
  const parsed = join(dirname(fileURLToPath(import.meta.url)), PARSED_PROTO_FILE);
  if (!process.env.MCPLANE_PROTO_DIR && existsSync(parsed)) return protobuf.Root.fromJSON(JSON.parse(readFileSync(parsed, 'utf8')) as protobuf.INamespace);
  const dir = protoDir();
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => (existsSync(join(dir, target)) ? join(dir, target) : target);
  return root.loadSync(PROTO_FILES, { keepCase: LOADER_OPTIONS.keepCase });
}
