// Each service's methods with the coders of their messages, for the clients (client-contract.ts).
// From source they come from protobufjs reflection over the .proto files, which generates each
// coder with new Function on its first use. The bundles replace this module with the same
// exports generated at build time by pbjs (scripts/static-coders.ts), whose coders are plain
// code: V8's compile cache keeps them, and nothing parses the contract at start-up.
// test/cli/client-contract.test.ts holds both to what proto-loader does, method by method.

import protobuf from 'protobufjs';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { LOADER_OPTIONS, PROTO_FILES, protoDir } from './proto-files.ts';

/** What a client needs of a message type: protobufjs's Type and pbjs's classes both have it. */
export interface MessageCoder {
  /** The message's name, for errors. */
  readonly name: string;
  fromObject(object: Record<string, unknown>): object;
  encode(message: object): { finish(): Uint8Array };
  decode(bytes: Uint8Array): object;
  toObject(message: object, options: protobuf.IConversionOptions): Record<string, unknown>;
}

export interface ServiceMethod {
  name: string;
  requestStream: boolean;
  responseStream: boolean;
  request: MessageCoder;
  response: MessageCoder;
}

let root: protobuf.Root | undefined;

/** The methods of the service `fullName` (mcplane.v1.StatusService), in the contract's order. */
export function serviceMethods(fullName: string): ServiceMethod[] {
  root ??= loadRoot();
  return root.lookupService(fullName).methodsArray.map((method) => {
    method.resolve();
    return {
      name: method.name,
      requestStream: !!method.requestStream,
      responseStream: !!method.responseStream,
      request: method.resolvedRequestType!,
      response: method.resolvedResponseType!,
    };
  });
}

/** The contract as a reflection tree, read from the .proto files as scripts/build.ts reads them. */
export function loadRoot(): protobuf.Root {
  const dir = protoDir();
  const tree = new protobuf.Root();
  tree.resolvePath = (_origin, target) => (existsSync(join(dir, target)) ? join(dir, target) : target);
  return tree.loadSync(PROTO_FILES, { keepCase: LOADER_OPTIONS.keepCase });
}
