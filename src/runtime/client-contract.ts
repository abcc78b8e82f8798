// The clients' view of the mcplane.v1 contract (mcctl's, the agent's): a client constructor per
// service, made from each method's message coders (message-coders.ts) without @grpc/proto-loader.
// proto-loader (runtime/proto.ts, for the server) also builds every message's descriptor and
// encodes every file's for reflection, which a client never serves: that was a third of
// `mcctl get pools`'s start-up, and a part of every agent start. What a call sees is the same:
// each method's path, streaming, and serialization are proto-loader's (its createSerializer,
// createDeserializer with LOADER_OPTIONS); test/cli/client-contract.test.ts compares them.

import { makeClientConstructor, type MethodDefinition, type ServiceDefinition } from '@grpc/grpc-js';
import type { IConversionOptions } from 'protobufjs';
import { serviceMethods, type MessageCoder, type ServiceMethod } from './message-coders.ts';
import { LOADER_OPTIONS } from './proto-files.ts';
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

/** Each service's constructor is made when first read: the agent uses one service of four, `mcctl get pools` one. */
export function loadClientContract(): ClientContract {
  if (!cached) {
    const made = new Map<string, unknown>();
    const contract = {};
    for (const name of SERVICES) {
      Object.defineProperty(contract, name, {
        enumerable: true,
        get() {
          if (!made.has(name)) made.set(name, makeClientConstructor(serviceDefinition(`mcplane.v1.${name}`), name));
          return made.get(name);
        },
      });
    }
    cached = contract as ClientContract;
  }
  return cached;
}

/**
 * The service as proto-loader's createServiceDefinition makes it, less the reflection parts.
 * `methods`: its methods from another source of coders (a test's generated ones).
 */
export function serviceDefinition(fullName: string, methods: ServiceMethod[] = serviceMethods(fullName)): ServiceDefinition {
  const definition: Record<string, MethodDefinition<unknown, unknown>> = {};
  for (const method of methods) {
    definition[method.name] = {
      path: `/${fullName}/${method.name}`,
      requestStream: method.requestStream,
      responseStream: method.responseStream,
      requestSerialize: serializer(method.request),
      requestDeserialize: deserializer(method.request),
      responseSerialize: serializer(method.response),
      responseDeserialize: deserializer(method.response),
      // lodash.camelcase, as proto-loader names it; the contract's method names are PascalCase words.
      originalName: method.name.charAt(0).toLowerCase() + method.name.slice(1),
    };
  }
  return definition as ServiceDefinition;
}

function serializer(type: MessageCoder): (value: unknown) => Buffer {
  return (value) => {
    if (Array.isArray(value)) throw new Error(`Failed to serialize message: expected object with ${type.name} structure, got array instead`);
    return type.encode(type.fromObject(value as Record<string, unknown>)).finish() as Buffer;
  };
}

function deserializer(type: MessageCoder): (bytes: Buffer) => unknown {
  return (bytes) => type.toObject(type.decode(bytes), LOADER_OPTIONS as IConversionOptions);
}
