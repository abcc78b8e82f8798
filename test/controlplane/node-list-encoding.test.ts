// ListNodes built from each node's cached bytes decodes to exactly what encoding the whole
// response as an object gives: the contract's own decoder is the judge.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { NodeListEncoder } from '../../src/controlplane/api/node-list-encoding.ts';
import { nodeToWire } from '../../src/controlplane/api/to-wire.ts';
import { EMPTY_NODE_STATUS, type NodeView } from '../../src/controlplane/cache/cluster-cache.ts';
import { loadMcplaneProto } from '../../src/runtime/proto.ts';

const methods = loadMcplaneProto().grpc.mcplane.v1.StatusService.service;

function view(i: number): NodeView {
  return {
    name: `node-${String(i).padStart(4, '0')}`,
    labels: { 'node-role.kubernetes.io/worker': '', rack: `r${i % 7}`, 'long-label': 'x'.repeat(i % 300) },
    poolLabels: {},
    pool: 'worker',
    registeredAt: 1_700_000_000_000 + i,
    desiredConfig: 'rendered-worker-0123',
    status: { ...EMPTY_NODE_STATUS, currentConfig: 'rendered-worker-0123', state: i % 3 ? 'Done' : 'Working', reason: i % 5 ? '' : 'ünïcode reason ✓' },
    lastSeen: 1_700_000_100_000 + i,
    connected: i % 2 === 0,
    resourceVersion: String(1000 + i),
  };
}

test('the concatenated list decodes as the object encoding does, with a token and a multi-byte count', () => {
  const encoder = new NodeListEncoder(nodeToWire, methods.GetNode.responseSerialize);
  const views = Array.from({ length: 300 }, (_, i) => view(i));
  for (const [token, remaining] of [['', 0], ['bjpub2RlLTAyOTk', 4_700], ['x', 1]] as const) {
    const fast = encoder.listResponse(views, token, remaining).bytes;
    const slow = methods.ListNodes.responseSerialize({ nodes: views.map(nodeToWire), continueToken: token, remainingItemCount: remaining });
    assert.deepEqual(methods.ListNodes.responseDeserialize(fast), methods.ListNodes.responseDeserialize(slow));
    // protobufjs also writes the token and count when they are their defaults ("" and 0): 4 bytes.
    assert.ok(fast.length <= slow.length && slow.length - fast.length <= 4, `${fast.length} vs ${slow.length} bytes`);
  }
  // An empty page is an empty message.
  assert.equal(encoder.listResponse([], '', 0).bytes.length, 0);
});

test('a node is encoded once per view: a changed node is a new view and new bytes', () => {
  let encoded = 0;
  const encoder = new NodeListEncoder(nodeToWire, (n) => { encoded++; return methods.GetNode.responseSerialize(n); });
  const a = view(1);
  encoder.listResponse([a, view(2)], '', 0);
  encoder.listResponse([a], '', 0);
  assert.equal(encoded, 2);
  const changed: NodeView = { ...a, status: { ...a.status, state: 'Degraded' } };
  assert.equal(methods.GetNode.responseDeserialize(encoder.nodeBytes(changed)).status?.state, 'Degraded');
  assert.equal(encoded, 3);
});
