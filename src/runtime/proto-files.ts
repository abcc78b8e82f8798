// Where the mcplane.v1 contract is and how it is read, without loading it: mcctl's client
// contract (src/runtime/client-contract.ts) needs these and not @grpc/proto-loader, which
// runtime/proto.ts loads.

import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Options } from '@grpc/proto-loader';

export const PROTO_FILES = ['mcplane/v1/agent.proto', 'mcplane/v1/status.proto', 'mcplane/v1/config.proto', 'mcplane/v1/identity.proto'];

export const LOADER_OPTIONS: Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

/** The file scripts/build.ts writes beside a bundle: the contract parsed at build time. */
export const PARSED_PROTO_FILE = 'mcplane-proto.json';

/** Where proto/ is: beside the source tree, beside a bundle, or where MCPLANE_PROTO_DIR says. */
export function protoDir(): string {
  if (process.env.MCPLANE_PROTO_DIR) return process.env.MCPLANE_PROTO_DIR;
  const here = dirname(fileURLToPath(import.meta.url));
  for (const candidate of [join(here, '..', '..', 'proto'), join(here, 'proto'), join(here, '..', 'proto')]) {
    if (existsSync(join(candidate, 'mcplane', 'v1', 'agent.proto'))) return candidate;
  }
  throw new Error(`cannot find mcplane's proto files near ${here}; set MCPLANE_PROTO_DIR`);
}
