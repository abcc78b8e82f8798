// Messages encoded once and written to many streams. When a pool's rendered config changes, the
// server sends the same assignment (tens of KiB of spec) to every node of the pool: protobuf
// encoding it once per stream cost more CPU than anything else in the fan-out, all of it on the
// event loop that also answers status reads. grpc-js encodes what a stream writes with the
// method's serializer; a service definition wrapped here lets a PreEncoded through as it is.

import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';

/** A message's wire bytes, written as they are by a stream of a wrapped service. */
export class PreEncoded {
  readonly bytes: Buffer;
  constructor(bytes: Buffer) {
    this.bytes = bytes;
  }
}

/** Encodes `message` with `method`'s response serializer, for writing to many of its streams. */
export function preEncode<Res>(method: Pick<MethodDefinition<never, Res>, 'responseSerialize'>, message: Res): PreEncoded {
  return new PreEncoded(method.responseSerialize(message));
}

/** `service` with every method's responses passed through as they are when they are PreEncoded. */
export function acceptingPreEncoded<S extends ServiceDefinition>(service: S): S {
  const wrapped: Record<string, MethodDefinition<unknown, unknown>> = {};
  for (const [name, method] of Object.entries(service) as [string, MethodDefinition<unknown, unknown>][]) {
    const serialize = method.responseSerialize;
    wrapped[name] = { ...method, responseSerialize: (value) => (value instanceof PreEncoded ? value.bytes : serialize(value)) };
  }
  return wrapped as S;
}
