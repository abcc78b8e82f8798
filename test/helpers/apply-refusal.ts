// An Apply refused as a whole, as the API tests of validation check it: INVALID_ARGUMENT, with
// every problem as "source object field rule" in order. Shared so each of those tests states only
// its manifests and the problems it expects.

import assert from 'node:assert/strict';
import { status as Status } from '@grpc/grpc-js';
import { call } from '../../src/cli/client/call.ts';
import type { Clients } from '../../src/cli/client/connection.ts';
import { RemoteCallError } from '../../src/machineconfig/index.ts';

/** Applies `manifests`, asserts the refusal lists exactly `problems`, and returns the error. */
export async function assertApplyRefused(c: Clients, manifests: { source: string; text: string }[], problems: string[]): Promise<RemoteCallError> {
  let refused: RemoteCallError | undefined;
  await assert.rejects(call(c, c.config.apply.bind(c.config), { manifests, dryRun: false }, 'apply'), (err: unknown) => {
    assert.ok(err instanceof RemoteCallError);
    assert.equal(err.grpcCode, Status.INVALID_ARGUMENT);
    assert.deepEqual(err.problems.map((p) => `${p.source} ${p.object} ${p.field} ${p.rule}`), problems);
    refused = err;
    return true;
  });
  return refused!;
}
