import type { NodeRecord, NodeStatus } from '../../src/machineconfig/index.ts';

export function nodeRecord(name: string, overrides: Partial<Omit<NodeRecord, 'status'>> & { status?: Partial<NodeStatus> } = {}): NodeRecord {
  const { status, ...rest } = overrides;
  return {
    name,
    labels: { 'node-role.kubernetes.io/worker': '' },
    pool: 'worker',
    registeredAt: 0,
    desiredConfig: 'old',
    lastSeen: 0,
    connected: true,
    ...rest,
    status: {
      currentConfig: 'old', desiredConfig: 'old', state: 'Done', phase: 'done', reason: '', drift: [], os: null,
      bootId: 'b', agentVersion: 'test', lastDisruption: '',
      ...status,
    },
  };
}
