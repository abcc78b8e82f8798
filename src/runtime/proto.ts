// Loads the mcplane.v1 gRPC contract from proto/. The loader options must match the flags
// `npm run proto:types` gives proto-loader-gen-types, or the generated types would lie.

import { loadPackageDefinition, type GrpcObject } from '@grpc/grpc-js';
import { fromJSON, loadSync, type Options, type PackageDefinition } from '@grpc/proto-loader';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ProtoGrpcType as AgentProto } from './generated/agent.ts';
import type { ProtoGrpcType as ConfigProto } from './generated/config.ts';
import type { ProtoGrpcType as IdentityProto } from './generated/identity.ts';
import type { ProtoGrpcType as StatusProto } from './generated/status.ts';

export const PROTO_FILES = ['mcplane/v1/agent.proto', 'mcplane/v1/status.proto', 'mcplane/v1/config.proto', 'mcplane/v1/identity.proto'];

export const LOADER_OPTIONS: Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

/** Where proto/ is: beside the source tree, beside a bundle, or where MCPLANE_PROTO_DIR says. */
export function protoDir(): string {
  if (process.env.MCPLANE_PROTO_DIR) return process.env.MCPLANE_PROTO_DIR;
  const here = dirname(fileURLToPath(import.meta.url));
  for (const candidate of [join(here, '..', '..', 'proto'), join(here, 'proto'), join(here, '..', 'proto')]) {
    if (existsSync(join(candidate, 'mcplane', 'v1', 'agent.proto'))) return candidate;
  }
  throw new Error(`cannot find mcplane's proto files near ${here}; set MCPLANE_PROTO_DIR`);
}

let cached: { definition: PackageDefinition; grpc: McplaneGrpc } | undefined;

export type McplaneGrpc = AgentProto & ConfigProto & IdentityProto & StatusProto;

export function loadMcplaneProto(): { definition: PackageDefinition; grpc: McplaneGrpc } {
  if (!cached) {
    const definition = loadDefinition();
    cached = { definition, grpc: loadPackageDefinition(definition) as GrpcObject as unknown as McplaneGrpc };
  }
  return cached;
}

/** The file scripts/build.ts writes beside a bundle: the contract parsed at build time. */
export const PARSED_PROTO_FILE = 'mcplane-proto.json';

/**
 * A bundle reads the contract parsed at build time (protobufjs' JSON of the same files): parsing
 * the .proto text took about a third of mcctl's start-up. From source, the .proto files.
 */
function loadDefinition(): PackageDefinition {
  const parsed = join(dirname(fileURLToPath(import.meta.url)), PARSED_PROTO_FILE);
  if (!process.env.MCPLANE_PROTO_DIR && existsSync(parsed)) return fromJSON(JSON.parse(readFileSync(parsed, 'utf8')) as Parameters<typeof fromJSON>[0], LOADER_OPTIONS);
  return loadSync(PROTO_FILES, { ...LOADER_OPTIONS, includeDirs: [protoDir()] });
}
