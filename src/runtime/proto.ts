// Loads the mcplane.v1 gRPC contract from proto/. The loader options must match the flags
// `npm run proto:types` gives proto-loader-gen-types, or the generated types would lie.

import { loadPackageDefinition, type GrpcObject } from '@grpc/grpc-js';
import { fromJSON, loadSync, type PackageDefinition } from '@grpc/proto-loader';
import { LOADER_OPTIONS, PARSED_PROTO_FILE, PROTO_FILES, protoDir } from './proto-files.ts';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ProtoGrpcType as AgentProto } from './generated/agent.ts';
import type { ProtoGrpcType as ConfigProto } from './generated/config.ts';
import type { ProtoGrpcType as IdentityProto } from './generated/identity.ts';
import type { ProtoGrpcType as StatusProto } from './generated/status.ts';

// The constants live apart so that mcctl can use them without loading proto-loader (proto-files.ts).
export { LOADER_OPTIONS, PARSED_PROTO_FILE, PROTO_FILES, protoDir } from './proto-files.ts';

let cached: { definition: PackageDefinition; grpc: McplaneGrpc } | undefined;

export type McplaneGrpc = AgentProto & ConfigProto & IdentityProto & StatusProto;

export function loadMcplaneProto(): { definition: PackageDefinition; grpc: McplaneGrpc } {
  if (!cached) {
    const definition = loadDefinition();
    cached = { definition, grpc: loadPackageDefinition(definition) as GrpcObject as unknown as McplaneGrpc };
  }
  return cached;
}

/**
 * A bundle reads the contract parsed at build time (protobufjs' JSON of the same files): parsing
 * the .proto text took about a third of mcctl's start-up. From source, the .proto files.
 */
function loadDefinition(): PackageDefinition {
  const parsed = join(dirname(fileURLToPath(import.meta.url)), PARSED_PROTO_FILE);
  if (!process.env.MCPLANE_PROTO_DIR && existsSync(parsed)) return fromJSON(JSON.parse(readFileSync(parsed, 'utf8')) as Parameters<typeof fromJSON>[0], LOADER_OPTIONS);
  return loadSync(PROTO_FILES, { ...LOADER_OPTIONS, includeDirs: [protoDir()] });
}
