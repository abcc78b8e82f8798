import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { ConflictError } from '../../src/machineconfig/index.ts';
import { SqliteStore } from '../../src/controlplane/store/sqlite-store.ts';
import type { ChangeEvent } from '../../src/controlplane/store/store.ts';
import { REPO_ROOT } from '../helpers/run-cli.ts';

const tempDir = () => mkdtempSync(join(tmpdir(), 'mcplane-store-'));

test('put, get, list; resourceVersion changes on every write; createdAt does not', async () => {
  const store = new SqliteStore(tempDir());
  const [a1] = await store.commit([{ type: 'put', kind: 'MachineConfig', name: 'a', value: { n: 1 } }]);
  const [a2] = await store.commit([{ type: 'put', kind: 'MachineConfig', name: 'a', value: { n: 2 } }]);
  assert.notEqual(a1!.resourceVersion, a2!.resourceVersion);
  assert.equal(a1!.createdAt, a2!.createdAt);
  assert.deepEqual((await store.get('MachineConfig', 'a'))!.value, { n: 2 });
  assert.equal(await store.get('MachineConfig', 'missing'), undefined);
  await store.commit([{ type: 'put', kind: 'MachineConfigPool', name: 'a', value: {} }]);
  assert.deepEqual((await store.list('MachineConfig')).map((o) => o.name), ['a'], 'kinds are separate');
  await store.close();
});

test('compare-and-swap: a stale resourceVersion or an existing object is a ConflictError', async () => {
  const store = new SqliteStore(tempDir());
  const [v1] = await store.commit([{ type: 'put', kind: 'Node', name: 'n', value: 1, expectedVersion: null }]);
  await assert.rejects(store.commit([{ type: 'put', kind: 'Node', name: 'n', value: 2, expectedVersion: null }]), ConflictError);
  await store.commit([{ type: 'put', kind: 'Node', name: 'n', value: 2, expectedVersion: v1!.resourceVersion }]);
  await assert.rejects(store.commit([{ type: 'put', kind: 'Node', name: 'n', value: 3, expectedVersion: v1!.resourceVersion }]), (err: unknown) => {
    assert.ok(err instanceof ConflictError);
    assert.equal(err.code, 'MCPLANE_CONFLICT');
    assert.match(err.message, /Node\/n: resourceVersion \d+ is stale/);
    return true;
  });
  assert.equal((await store.get('Node', 'n'))!.value, 2);
  await store.close();
});

test('a batch is all or nothing', async () => {
  const store = new SqliteStore(tempDir());
  await store.commit([{ type: 'put', kind: 'Node', name: 'exists', value: 0 }]);
  await assert.rejects(store.commit([
    { type: 'put', kind: 'MachineConfig', name: 'first', value: 1 },
    { type: 'put', kind: 'Node', name: 'exists', value: 1, expectedVersion: null },
  ]), ConflictError);
  assert.equal(await store.get('MachineConfig', 'first'), undefined);
  await store.close();
});

test('watchers see committed changes in order, deletes included', async () => {
  const store = new SqliteStore(tempDir());
  const seen: ChangeEvent[] = [];
  store.watch((events) => seen.push(...events));
  await store.commit([{ type: 'put', kind: 'Node', name: 'n', value: 1 }]);
  await store.commit([{ type: 'delete', kind: 'Node', name: 'n' }]);
  await store.commit([{ type: 'delete', kind: 'Node', name: 'never-existed' }]);
  assert.deepEqual(seen.map((e) => `${e.type}:${e.object.name}`), ['put:n', 'delete:n']);
  await store.close();
});

test('a reopened store has everything, WAL mode is on', async () => {
  const dir = tempDir();
  const store = new SqliteStore(dir);
  for (let i = 0; i < 50; i++) await store.commit([{ type: 'put', kind: 'MachineConfig', name: `mc-${i}`, value: { i } }]);
  await store.close();
  const again = new SqliteStore(dir);
  assert.equal((await again.list('MachineConfig')).length, 50);
  const { DatabaseSync } = await import('node:sqlite');
  const raw = new DatabaseSync(join(dir, 'mcplane.db'));
  assert.equal((raw.prepare('PRAGMA journal_mode').get() as { journal_mode: string }).journal_mode, 'wal');
  raw.close();
  await again.close();
});

test('kill -9 during a burst of writes loses no acknowledged write', async () => {
  const dir = tempDir();
  // A separate process commits as fast as it can and prints each name once commit() resolved.
  const script = `
    import { SqliteStore } from './src/controlplane/store/sqlite-store.ts';
    const store = new SqliteStore(${JSON.stringify(dir)});
    for (let i = 0; ; i++) {
      await store.commit([{ type: 'put', kind: 'MachineConfig', name: 'mc-' + i, value: { i, pad: 'x'.repeat(2000) } }]);
      process.stdout.write('ack mc-' + i + '\\n');
    }`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const acked: string[] = [];
  const lines = createInterface({ input: child.stdout! });
  await new Promise<void>((resolve) => {
    lines.on('line', (line) => {
      acked.push(line.slice(4));
      if (acked.length === 200) {
        child.kill('SIGKILL');
        resolve();
      }
    });
  });
  await new Promise((r) => child.once('exit', r));
  const store = new SqliteStore(dir);
  const stored = new Set((await store.list('MachineConfig')).map((o) => o.name));
  const lost = acked.filter((name) => !stored.has(name));
  assert.deepEqual(lost, []);
  assert.ok(stored.size >= 200);
  await store.close();
});
