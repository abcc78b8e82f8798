// An agent's report is admitted in one place and its NodeStatus record written by one writer
// (issue 35, item 4). Before, agent-service.ts bounded each report and agent-entry.ts checked
// its state, each calling itself the sanitizer, and three places in sessions/ built NodeStatus
// records (registration, the batches, the end of a session): a rule added to one was missed by
// the others. These guards fail when a second one appears.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { admitNodeStatus, MAX_REASON_CHARS, type NodeStatus } from '../../src/machineconfig/index.ts';

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'generated' ? [] : sources(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}
const files = sources('src').map((path) => ({ path, text: readFileSync(path, 'utf8') }));

test('NodeStatus records are written by node-status-writer.ts alone', () => {
  const writers = files.filter((f) => /type: 'put', kind: 'NodeStatus'/.test(f.text)).map((f) => f.path);
  assert.deepEqual(writers, ['src/controlplane/sessions/node-status-writer.ts']);
});

test('a report is admitted by agent-entry.ts alone, through admitNodeStatus', () => {
  const admitting = files.filter((f) => /\b(admitNodeStatus|boundNodeStatus)\(/.test(f.text) && !f.path.startsWith('src/machineconfig/')).map((f) => f.path);
  assert.deepEqual(admitting, ['src/controlplane/sessions/agent-entry.ts']);
});

test('admission bounds every field and makes an unknown state Degraded, quoting it once', () => {
  const base: NodeStatus = { currentConfig: 'a', desiredConfig: 'a', state: 'Done', phase: '', reason: '', drift: [], os: null, bootId: 'b', agentVersion: 'v', lastDisruption: '' };
  assert.deepEqual(admitNodeStatus(base), base);
  const odd = admitNodeStatus({ ...base, state: 'Exploded' as NodeStatus['state'], reason: `disk\n${'x'.repeat(MAX_REASON_CHARS * 2)}` });
  assert.equal(odd.state, 'Degraded');
  assert.match(odd.reason, /^agent reported unknown state "Exploded": disk\n/);
  assert.ok(odd.reason.length <= MAX_REASON_CHARS, `the quoted state does not push the reason past its bound (${odd.reason.length})`);
  assert.equal(admitNodeStatus(odd).reason, odd.reason, 'admitting twice changes nothing');
});
