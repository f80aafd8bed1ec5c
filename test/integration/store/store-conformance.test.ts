/**
 * The Store port's conformance suite: every test runs against each adapter (SQLite file in a
 * temp dir; PostgreSQL on a throwaway server), so both engines keep the same contract. A few
 * facts of one engine only (SQLite's file mode and PRAGMAs) are in their own block.
 */
import { stat } from 'node:fs/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FusionError } from '../../../src/errors.js';
import { silentLogger } from '../../../src/log.js';
import { openPgStore } from '../../../src/store/pg-store.js';
import type { ResultRecord, Store } from '../../../src/store/port.js';
import type { SqliteStore } from '../../../src/store/sqlite-store.js';
import { LATEST_SCHEMA_VERSION } from '../../../src/store/migrations.js';
import { driveTo, newTask, openStore, tempDir, useStoreAdapters, type TempDir, type TestDatabase } from './helpers.js';

const adapters = useStoreAdapters();

function resultFor(taskId: string): ResultRecord {
  return {
    taskId,
    answerPath: `/var/lib/fusion/results/${taskId}/answer.md`,
    answerSha256: 'b'.repeat(64),
    answerBytes: 42,
    metadata: '{"engine":"builtin"}',
    metadataSha256: 'c'.repeat(64),
    committedAt: new Date().toISOString(),
  };
}

async function expectCode(promise: Promise<unknown>, code: string): Promise<FusionError> {
  const err: unknown = await promise.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(FusionError);
  expect((err as FusionError).code).toBe(code);
  return err as FusionError;
}

describe('sqlite only', () => {
  let tmp: TempDir;
  let store: SqliteStore;

  beforeEach(async () => {
    tmp = await tempDir();
    store = await openStore(tmp.file);
  });

  afterEach(async () => {
    await store.close();
    await tmp.cleanup();
  });

  it('creates the file with mode 0600, and the WAL file inherits it', async () => {
    await store.createTask(newTask());
    expect((await stat(tmp.file)).mode & 0o777).toBe(0o600);
    expect((await stat(`${tmp.file}-wal`)).mode & 0o777).toBe(0o600);
  });

  it('runs WAL, synchronous FULL, foreign keys and a 5 s busy timeout', async () => {
    expect(await store.pragmas()).toEqual({
      journalMode: 'wal', synchronous: 2, foreignKeys: true, busyTimeoutMs: 5000, schemaVersion: LATEST_SCHEMA_VERSION,
    });
  });

  it('wraps an open failure as store_error', async () => {
    const err = await expectCode(openStore(`${tmp.dir}/no/such/dir/fusion.db`), 'store_error');
    expect(err.cause).toBeDefined();
  });
});

describe.runIf(adapters.some((a) => a.engine === 'postgres'))('postgres only', () => {
  it('wraps a connection failure as store_error, with the password masked', async () => {
    const err = await expectCode(openPgStore({ url: 'postgres://fusion:secret@127.0.0.1:1/none', log: silentLogger() }), 'store_error');
    expect(err.message).not.toContain('secret');
    expect(err.cause).toBeDefined();
  });
});

describe.each(adapters)('$engine store', (adapter) => {
  let db: TestDatabase;
  let store: Store;

  beforeEach(async () => {
    db = await adapter.newDatabase();
    store = await db.open();
  });

  afterEach(async () => {
    await store.close();
    await db.cleanup();
  });

  describe('tasks', () => {
    it('creates, gets and lists tasks', async () => {
      const a = await store.createTask(newTask());
      const b = await store.createTask(newTask({ workflow: 'research' }));
      expect(a).toMatchObject({ state: 'initializing', error: null, usage: null, usageDelivered: false, resumeCount: 0 });
      expect(a.createdAt).toBe(new Date(a.createdAt).toISOString());
      expect(await store.getTask(a.id)).toEqual(a);
      expect(await store.getTask('missing')).toBeNull();
      expect((await store.listTasks()).map((t) => t.id)).toEqual([b.id, a.id]);
      expect((await store.listTasks({ limit: 1 })).map((t) => t.id)).toEqual([b.id]);
      await store.transitionTask(a.id, 'initializing', 'candidates_running');
      expect((await store.listTasks({ state: 'candidates_running' })).map((t) => t.id)).toEqual([a.id]);
      await expectCode(store.listTasks({ limit: 0 }), 'invalid_input');
    });

    it('writes the first transition event with the task', async () => {
      const task = await store.createTask(newTask());
      const events = await store.listEvents(task.id);
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ taskId: task.id, kind: 'transition', data: { from: null, to: 'initializing' } });
    });

    it('refuses a duplicate id with conflict', async () => {
      const task = newTask();
      await store.createTask(task);
      await expectCode(store.createTask(task), 'conflict');
      expect(await store.listEvents(task.id)).toHaveLength(1);
    });

    it('creates concurrent tasks together; a duplicate among them is refused alone, the others are stored whole', async () => {
      // Concurrent creates share a batch and its multi-row statements (task-create-batch.ts).
      const first = newTask();
      await store.createTask(first);
      const fresh = Array.from({ length: 12 }, (_, i) => newTask(i % 3 === 0 ? { queued: true } : {}));
      const results = await Promise.allSettled([...fresh.slice(0, 6).map((t) => store.createTask(t)), store.createTask(first), ...fresh.slice(6).map((t) => store.createTask(t))]);
      expect(results.map((r) => r.status)).toEqual([...Array(6).fill('fulfilled'), 'rejected', ...Array(6).fill('fulfilled')]);
      expect(((results[6] as PromiseRejectedResult).reason as { code: string }).code).toBe('conflict');
      for (const [i, t] of fresh.entries()) {
        const stored = await store.getTask(t.id);
        expect(stored?.state).toBe(i % 3 === 0 ? 'queued' : 'initializing');
        const events = (await store.listEvents(t.id)).map((e) => e.data.to);
        expect(events).toEqual(i % 3 === 0 ? ['initializing', 'queued'] : ['initializing']);
      }
      expect(await store.listEvents(first.id)).toHaveLength(1);
    });

    it('lists only non-terminal tasks for recovery', async () => {
      const live = await store.createTask(newTask());
      const dead = await store.createTask(newTask());
      await store.transitionTask(dead.id, 'initializing', 'cancelled');
      expect((await store.listNonTerminalTasks()).map((t) => t.id)).toEqual([live.id]);
    });
  });

  describe('repository bundles', () => {
    it('stores a bundle once by digest in the task\'s own transaction and names it on the task', async () => {
      const data = Buffer.concat([Buffer.from('tar bytes '), Buffer.from([0, 1, 2, 255])]);
      const digest = 'd'.repeat(64);
      const a = await store.createTask(newTask({ bundle: { digest, data } }));
      const b = await store.createTask(newTask({ bundle: { digest, data: Buffer.from('ignored: same digest, stored once') } }));
      expect(a.bundleDigest).toBe(digest);
      expect(await store.getTask(a.id)).toEqual(a);
      expect((await store.getTask(b.id))?.bundleDigest).toBe(digest);
      const stored = await store.getRepoBundle(digest);
      expect(stored).toMatchObject({ digest, bytes: data.length });
      expect(stored?.data.equals(data)).toBe(true);
      expect(await store.getRepoBundle('e'.repeat(64))).toBeNull();
      // Outside cluster mode a task has no bundle.
      expect((await store.createTask(newTask())).bundleDigest).toBeNull();
    });

    it('stores nothing of a task whose insert fails (the bundle shares its transaction)', async () => {
      const task = newTask();
      await store.createTask(task);
      await expectCode(store.createTask({ ...task, bundle: { digest: 'f'.repeat(64), data: Buffer.from('x') } }), 'conflict');
      expect(await store.getRepoBundle('f'.repeat(64))).toBeNull();
    });

    it('commits checkpoints known at submission with the task row, and none of a refused insert', async () => {
      const task = newTask({ checkpoints: [{ key: 'repo-snapshot', value: '{"digest":"a"}' }] });
      const created = await store.createTask(task);
      expect(created).not.toHaveProperty('checkpoints');
      expect(await store.getCheckpoint(task.id, 'repo-snapshot')).toBe('{"digest":"a"}');
      // A duplicate id is refused whole: its checkpoint does not overwrite the first task's.
      await expectCode(store.createTask({ ...task, checkpoints: [{ key: 'repo-snapshot', value: '{"digest":"b"}' }] }), 'conflict');
      expect(await store.getCheckpoint(task.id, 'repo-snapshot')).toBe('{"digest":"a"}');
    });
  });

  describe('transitions', () => {
    it('is a compare-and-set: a stale `from` returns null and changes nothing', async () => {
      const task = await store.createTask(newTask());
      const moved = await store.transitionTask(task.id, 'initializing', 'candidates_running', { eventData: { note: 'go' } });
      expect(moved?.state).toBe('candidates_running');
      expect(await store.transitionTask(task.id, 'initializing', 'candidates_running')).toBeNull();
      expect(await store.transitionTask('missing', 'initializing', 'failed')).toBeNull();
      const events = await store.listEvents(task.id);
      expect(events.map((e) => e.data)).toEqual([
        { from: null, to: 'initializing' },
        { from: 'initializing', to: 'candidates_running', note: 'go' },
      ]);
    });

    it('only one of two racing transitions wins', async () => {
      const task = await store.createTask(newTask());
      const outcomes = await Promise.all([
        store.transitionTask(task.id, 'initializing', 'candidates_running'),
        store.transitionTask(task.id, 'initializing', 'cancelled'),
      ]);
      expect(outcomes.filter((o) => o !== null)).toHaveLength(1);
    });

    it('throws invalid_transition for a forbidden move, before touching the database', async () => {
      const task = await store.createTask(newTask());
      await expectCode(store.transitionTask(task.id, 'initializing', 'merging'), 'invalid_transition');
      await expectCode(store.transitionTask(task.id, 'completed', 'failed'), 'invalid_transition');
      expect((await store.getTask(task.id))?.state).toBe('initializing');
    });

    it('records error and usage, and writes the terminal notification (docs/behaviour.md#f2)', async () => {
      const task = await store.createTask(newTask());
      await store.transitionTask(task.id, 'initializing', 'candidates_running');
      const error = { code: 'child_timeout', message: 'candidate-2 hit its wall timeout', state: 'candidates_running' as const };
      const failed = await store.transitionTask(task.id, 'candidates_running', 'failed', {
        error, usage: '{"entries":[],"totals":{"inputTokens":0,"outputTokens":0,"requests":12}}', eventData: { from: 'forged', stage: 'candidate-2' },
      });
      expect(failed).toMatchObject({ state: 'failed', error, usage: { entries: [], totals: { inputTokens: 0, outputTokens: 0, requests: 12 } } });
      const events = await store.listEvents(task.id, 2);
      expect(events.map((e) => e.kind)).toEqual(['transition', 'terminal']);
      expect(events[0]?.data).toEqual({ from: 'candidates_running', to: 'failed', stage: 'candidate-2', error });
      expect(events[1]?.data).toEqual({
        taskId: task.id,
        name: 'investigate',
        status: 'failed',
        error,
        summary: 'fusion investigate failed: child_timeout: candidate-2 hit its wall timeout',
      });
    });

    it('a cancelled task without an error has error null', async () => {
      const task = await store.createTask(newTask({ workflow: 'research' }));
      await store.transitionTask(task.id, 'initializing', 'cancelled');
      const terminal = (await store.listEvents(task.id)).filter((e) => e.kind === 'terminal');
      expect(terminal.map((e) => e.data)).toEqual([
        { taskId: task.id, name: 'research', status: 'cancelled', error: null, summary: 'fusion research cancelled' },
      ]);
    });

    it('pages events with afterSeq', async () => {
      const task = await store.createTask(newTask());
      const progress = await store.appendEvent(task.id, 'progress', { stage: 'candidate-1', pct: 50 });
      const all = await store.listEvents(task.id);
      expect(all.map((e) => e.seq)).toEqual([...all.map((e) => e.seq)].sort((x, y) => x - y));
      expect(await store.listEvents(task.id, progress.seq)).toEqual([]);
      expect(await store.listEvents(task.id, progress.seq - 1)).toEqual([progress]);
      await expectCode(store.appendEvent('missing', 'progress', {}), 'not_found');
    });
  });

  describe('results', () => {
    it('commits the result with merging → completed and both events', async () => {
      const task = await store.createTask(newTask());
      await driveTo(store, task.id, 'merging');
      const result = resultFor(task.id);
      const done = await store.commitResult(result, { usage: '{"entries":[],"totals":{"inputTokens":0,"outputTokens":0,"requests":99}}' });
      expect(done).toMatchObject({ state: 'completed', usage: { entries: [], totals: { inputTokens: 0, outputTokens: 0, requests: 99 } }, error: null });
      expect(await store.getResult(task.id)).toEqual(result);
      const tail = (await store.listEvents(task.id)).slice(-2);
      expect(tail.map((e) => e.data)).toEqual([
        { from: 'merging', to: 'completed' },
        { taskId: task.id, name: 'investigate', status: 'completed', error: null, summary: 'fusion investigate completed' },
      ]);
    });

    it('keeps the answer bytes in the row on a shared (PostgreSQL) store only', async () => {
      const task = await store.createTask(newTask());
      await driveTo(store, task.id, 'merging');
      const answerData = Buffer.from('# answer\n\u00e9\u0000', 'utf8');
      await store.commitResult({ ...resultFor(task.id), answerData });
      const read = await store.getResult(task.id);
      if (adapter.engine === 'postgres') expect(read?.answerData?.equals(answerData)).toBe(true);
      else expect(read?.answerData).toBeUndefined();
    });

    it('writes nothing when the task is not merging', async () => {
      const task = await store.createTask(newTask());
      await driveTo(store, task.id, 'evaluating');
      const before = await store.listEvents(task.id);
      expect(await store.commitResult(resultFor(task.id))).toBeNull();
      expect(await store.getResult(task.id)).toBeNull();
      expect((await store.getTask(task.id))?.state).toBe('evaluating');
      expect(await store.listEvents(task.id)).toEqual(before);
    });

    it('a second commit returns null and keeps the first result', async () => {
      const task = await store.createTask(newTask());
      await driveTo(store, task.id, 'merging');
      const first = resultFor(task.id);
      await store.commitResult(first);
      expect(await store.commitResult({ ...first, answerBytes: 7 })).toBeNull();
      expect(await store.getResult(task.id)).toEqual(first);
    });
  });

  describe('usage, resume count, checkpoints', () => {
    it('claims usage delivery for the first caller only', async () => {
      const task = await store.createTask(newTask());
      await store.saveUsage(task.id, '{"entries":[],"totals":{"inputTokens":0,"outputTokens":0,"requests":5}}');
      const claims = await Promise.all([1, 2, 3, 4].map(() => store.claimUsageDelivery(task.id)));
      expect(claims.filter(Boolean)).toHaveLength(1);
      expect(await store.claimUsageDelivery(task.id)).toBe(false);
      expect(await store.getTask(task.id)).toMatchObject({ usage: { entries: [], totals: { inputTokens: 0, outputTokens: 0, requests: 5 } }, usageDelivered: true });
      expect(await store.claimUsageDelivery('missing')).toBe(false);
      await expectCode(store.saveUsage('missing', '{}'), 'not_found');
    });

    it('increments the resume count', async () => {
      const task = await store.createTask(newTask());
      expect(await store.incrementResumeCount(task.id)).toBe(1);
      expect(await store.incrementResumeCount(task.id)).toBe(2);
      await expectCode(store.incrementResumeCount('missing'), 'not_found');
    });

    it('saves and overwrites checkpoints', async () => {
      const task = await store.createTask(newTask());
      expect(await store.getCheckpoint(task.id, 'evaluation')).toBeNull();
      await store.saveCheckpoint(task.id, 'evaluation', 'v1');
      await store.saveCheckpoint(task.id, 'evaluation', 'v2');
      expect(await store.getCheckpoint(task.id, 'evaluation')).toBe('v2');
      await expectCode(store.saveCheckpoint('missing', 'k', 'v'), 'not_found');
    });

    it('drops checkpoints only once the task has a sealed tarball, which round-trips byte for byte (stored compressed)', async () => {
      const task = await store.createTask(newTask());
      await store.saveCheckpoint(task.id, 'candidates', 'c');
      expect(await store.dropSealedCheckpoints(task.id)).toBe(0); // not sealed: resume still needs them
      expect(await store.getCheckpoint(task.id, 'candidates')).toBe('c');
      const data = Buffer.concat([Buffer.from('task.json'), Buffer.alloc(20_000, 0x20)]);
      await store.saveTaskTarball({ taskId: task.id, sha256: 'e'.repeat(64), bytes: data.length, manifestSha256: 'f'.repeat(64), signature: null, publicKeySha256: null, createdAt: new Date().toISOString(), data });
      const back = await store.getTaskTarball(task.id);
      expect(back?.data.equals(data)).toBe(true);
      expect(back?.bytes).toBe(data.length);
      expect(await store.dropSealedCheckpoints(task.id)).toBe(1);
      expect(await store.getCheckpoint(task.id, 'candidates')).toBeNull();
    });
  });

  describe('attempts', () => {
    it('numbers concurrent attempts 1..5 without duplicates', async () => {
      const task = await store.createTask(newTask());
      const started = await Promise.all([1, 2, 3, 4, 5].map(() => store.startAttempt(task.id, 'evaluator')));
      expect(started.map((a) => a.attempt).sort()).toEqual([1, 2, 3, 4, 5]);
      expect(started.every((a) => a.status === 'running' && a.endedAt === null)).toBe(true);
      expect((await store.startAttempt(task.id, 'merger')).attempt).toBe(1);
    });

    it('finishes an attempt once', async () => {
      const task = await store.createTask(newTask());
      const a = await store.startAttempt(task.id, 'candidate-1');
      await store.finishAttempt(task.id, 'candidate-1', a.attempt, {
        status: 'succeeded', detail: '{"exit":0}', tarballPath: '/t/c1.tar', tarballSha256: 'd'.repeat(64),
      });
      const [done] = await store.listAttempts(task.id);
      expect(done).toMatchObject({ status: 'succeeded', detail: '{"exit":0}', tarballPath: '/t/c1.tar', tarballSha256: 'd'.repeat(64) });
      expect(done?.endedAt).not.toBeNull();
      await expectCode(store.finishAttempt(task.id, 'candidate-1', a.attempt, { status: 'failed' }), 'conflict');
      await expectCode(store.finishAttempt(task.id, 'candidate-1', 9, { status: 'failed' }), 'not_found');
      await expectCode(store.startAttempt('missing', 'merger'), 'not_found');
    });
  });

  describe('an attempt\'s success and its checkpoint are one commit', () => {
    it('writes the checkpoints and the usage with a success, and nothing with a refused finish', async () => {
      const task = await store.createTask(newTask());
      const a = await store.startAttempt(task.id, 'merger');
      await store.finishAttempt(task.id, 'merger', a.attempt, {
        status: 'succeeded', checkpoints: [{ key: 'output-merger', value: '{"text":"m"}' }], usage: '{"entries":[],"totals":{"inputTokens":0,"outputTokens":0,"requests":0}}',
      });
      expect(await store.getCheckpoint(task.id, 'output-merger')).toBe('{"text":"m"}');
      expect((await store.getTask(task.id))?.usage).toEqual({ entries: [], totals: { inputTokens: 0, outputTokens: 0, requests: 0 } });
      // A second finish of the same attempt is refused and its checkpoint is not written.
      await expectCode(store.finishAttempt(task.id, 'merger', a.attempt, { status: 'succeeded', checkpoints: [{ key: 'other', value: 'x' }] }), 'conflict');
      expect(await store.getCheckpoint(task.id, 'other')).toBeNull();
    });

    it('closes only the attempts still running, once', async () => {
      const task = await store.createTask(newTask());
      const done = await store.startAttempt(task.id, 'candidate-1');
      await store.finishAttempt(task.id, 'candidate-1', done.attempt, { status: 'succeeded' });
      await store.startAttempt(task.id, 'candidate-2');
      await store.startAttempt(task.id, 'candidate-3');
      expect(await store.closeRunningAttempts(task.id, '{"interrupted":true}')).toBe(2);
      expect(await store.closeRunningAttempts(task.id, '{"interrupted":true}')).toBe(0);
      const rows = await store.listAttempts(task.id);
      expect(rows.map((r) => [r.stage, r.status, r.detail])).toEqual([
        ['candidate-1', 'succeeded', null], ['candidate-2', 'failed', '{"interrupted":true}'], ['candidate-3', 'failed', '{"interrupted":true}'],
      ]);
      expect(rows.every((r) => r.endedAt !== null)).toBe(true);
    });
  });

  describe('durability and errors', () => {
    it('keeps everything across close and reopen', async () => {
      const task = await store.createTask(newTask());
      await driveTo(store, task.id, 'merging');
      await store.commitResult(resultFor(task.id));
      await store.saveCheckpoint(task.id, 'k', 'v');
      const events = await store.listEvents(task.id);
      await store.close();
      store = await db.open();
      expect((await store.getTask(task.id))?.state).toBe('completed');
      expect(await store.getCheckpoint(task.id, 'k')).toBe('v');
      expect(await store.listEvents(task.id)).toEqual(events);
      expect(await store.getResult(task.id)).not.toBeNull();
    });

    it('fails with store_error after close, never a raw engine error', async () => {
      const task = await store.createTask(newTask());
      const pending = store.getTask(task.id);
      await store.close();
      expect(await pending).not.toBeNull(); // work queued before close still completes
      await expectCode(store.getTask(task.id), 'store_error');
      await expectCode(store.createTask(newTask()), 'store_error');
      await expectCode(store.transitionTask(task.id, 'initializing', 'failed'), 'store_error');
      await store.close(); // a second close is a no-op
      store = await db.open(); // for afterEach
    });

  });
});
