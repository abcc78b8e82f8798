// The pinned image puller's error classes are declared where every other class is (ERROR_CLASSES,
// and status-errors.ts's table), each with its own stable code: the code is what a node's
// PinnedImageSetStatus.lastFailureCode carries to the control plane and mcctl.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { status as Status } from '@grpc/grpc-js';
import { CriCallError, ERROR_CLASSES, PinnedImageDiskSpaceError, PinnedImagePullError } from '../../src/machineconfig/errors.ts';
import { ERROR_CODE_TRAILER, toServiceError } from '../../src/controlplane/api/status-errors.ts';
import { createLogger } from '../../src/runtime/logger.ts';

test('CriCallError, PinnedImageDiskSpaceError and PinnedImagePullError are in ERROR_CLASSES with stable codes the status table maps', () => {
  const errors = [new CriCallError('PullImage', 'rpc error'), new PinnedImageDiskSpaceError('set', '/var/lib/containers', 1, 2, 3), new PinnedImagePullError('quay.io/a@sha256:x', 5, 'not found')];
  assert.deepEqual(errors.map((e) => e.code), ['MCPLANE_CRI_CALL', 'MCPLANE_PINNED_IMAGE_DISK_SPACE', 'MCPLANE_PINNED_IMAGE_PULL']);
  const log = createLogger({ level: 'silent' });
  for (const e of errors) {
    assert.ok((ERROR_CLASSES as readonly unknown[]).includes(e.constructor), `${e.constructor.name} is in ERROR_CLASSES`);
    const wire = toServiceError(e, log);
    assert.notEqual(wire.code, Status.UNKNOWN, `${e.code} has a status`);
    assert.deepEqual(wire.metadata!.get(ERROR_CODE_TRAILER), [e.code]);
  }
});
