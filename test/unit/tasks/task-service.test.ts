/**
 * The task service against fakes of its ports (in-memory store, scripted runners): receipts after
 * the durable row, rejection before anything exists, failure, cancel, admission, restart recovery.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { existsSync } from 'node:fs';
import { FusionError } from '../../../src/errors.js';
import type { TaskRunner } from '../../../src/tasks/runner-port.js';
import { createDirectDispatcher, type Dispatcher } from '../../../src/tasks/dispatcher.js';
import type { ClusterSignals, TaskQueue } from '../../../src/tasks/cluster-port.js';
import type { PackRequest } from '../../../src/bundles/pack-as-caller.js';
import { emptySkipReport } from '../../../src/bundles/pack.js';
import { DEFAULT_REPO_EXCLUDES } from '../../../src/bundles/excludes.js';
import { blockingRunner, completingRunner, INVESTIGATE_ARGS, makeDirs, makeService, until, type Dirs } from '../fakes/task-fixtures.js';

let dirs: Dirs;
beforeEach(() => {
  dirs = makeDirs();
});
afterEach(() => dirs.remove());

describe('TaskService.submit', () => {
  it('returns a receipt for a committed initializing row before the runner starts, then runs it to completed', async () => {
    const runner = completingRunner(dirs);
    const { service, store } = makeService(dirs, runner);
    const receipt = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    expect(receipt.taskId).toMatch(/^investigate-[0-9a-f]{32}$/);
    expect(receipt.state).toBe('initializing');
    expect(runner.runs).toHaveLength(0);
    expect(store.tasks.get(receipt.taskId)?.canonicalInputSha256).toBe(receipt.canonicalInputSha256);
    await until(async () => (await service.get(receipt.taskId)).state === 'completed');
    // The task files are written when the task starts.
    expect(existsSync(join(dirs.tasksDir, receipt.taskId, 'canonical-input.json'))).toBe(true);
    const kinds = store.events.filter((e) => e.taskId === receipt.taskId).map((e) => e.kind);
    expect(kinds.at(-1)).toBe('terminal');
  });

  it('reads no events back for a new task nobody listens to yet; a listener of all tasks still hears of it at once', async () => {
    // Both run slots held, so the next tasks wait queued and commit nothing after their receipt.
    const { service, store, bus } = makeService(dirs, blockingRunner(), { admission: { concurrency: 2, maxQueued: 100, maxQueuedPerCaller: 100 } });
    for (let i = 0; i < 2; i++) await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await until(() => service.runningTaskIds().size === 2);
    const reads: string[] = [];
    const listEvents = store.listEvents.bind(store);
    store.listEvents = async (taskId, afterSeq) => {
      reads.push(taskId);
      return listEvents(taskId, afterSeq);
    };
    const quiet = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    expect(quiet.state).toBe('queued');
    await new Promise((r) => setImmediate(r));
    expect(reads).not.toContain(quiet.taskId);
    const heard: string[] = [];
    const unsubscribe = bus.subscribe('*', (e) => heard.push(`${e.taskId} ${String(e.data.to)}`));
    const watched = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    // (The running tasks' own events may reach the bus meanwhile: only the new task's are asked.)
    const ofWatched = (): string[] => heard.filter((h) => h.startsWith(watched.taskId));
    await until(() => ofWatched().length === 2);
    expect(ofWatched()).toEqual([`${watched.taskId} initializing`, `${watched.taskId} queued`]);
    unsubscribe();
    await service.shutdown();
  });

  it('rejects bad input, a relative repo and a repo overlapping the data directory without creating anything', async () => {
    const { service, store } = makeService(dirs, completingRunner(dirs));
    await expect(service.submit({ workflow: 'investigate', arguments: { objective: '' }, repo: dirs.repo })).rejects.toMatchObject({ code: 'invalid_input' });
    await expect(service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: 'relative/path' })).rejects.toMatchObject({ code: 'invalid_input' });
    await expect(service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: join(dirs.base, 'data') })).rejects.toMatchObject({ code: 'invalid_input' });
    expect(store.tasks.size).toBe(0);
  });

  it('answers storage_full when the durable row cannot be written', async () => {
    const { service, store } = makeService(dirs, completingRunner(dirs));
    store.failNextCreate = Object.assign(new Error('SQLITE_FULL: database or disk is full'), { code: 'SQLITE_FULL' });
    await expect(service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo })).rejects.toMatchObject({ code: 'storage_full' });
  });

  it('a runner error fails the task with its code and the state it was in', async () => {
    const runner: TaskRunner = {
      async run({ control }) {
        await control.transition('candidates_running');
        throw new FusionError('launch_failed', 'no sandbox');
      },
    };
    const { service } = makeService(dirs, runner);
    const { taskId } = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await until(async () => (await service.get(taskId)).state === 'failed');
    expect((await service.get(taskId)).error).toMatchObject({ code: 'launch_failed', state: 'candidates_running' });
  });

  it('refuses with busy (nothing created) when the waiting bound is reached', async () => {
    const runner = blockingRunner();
    const { service, store } = makeService(dirs, runner, {
      dispatcher: createDirectDispatcher(1),
      admission: { maxQueued: 1, maxQueuedPerCaller: 1, concurrency: 1 },
    });
    await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await runner.started;
    await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await expect(service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo })).rejects.toMatchObject({ code: 'busy' });
    expect(store.tasks.size).toBe(2);
    await service.shutdown();
  });
});

describe('TaskService.cancel', () => {
  it('moves a running task to cancelled, aborts its run and waits for it', async () => {
    const runner = blockingRunner();
    const { service } = makeService(dirs, runner);
    const { taskId } = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    const ctx = await runner.started;
    await until(async () => (await service.get(taskId)).state === 'candidates_running');
    const task = await service.cancel(taskId);
    expect(task.state).toBe('cancelled');
    expect(task.error).toMatchObject({ code: 'cancelled', state: 'candidates_running' });
    expect(ctx.signal.aborted).toBe(true);
    expect(service.runningTaskIds().has(taskId)).toBe(false);
  });

  it('returns a terminal task as it is, and not_found for an unknown id', async () => {
    const { service } = makeService(dirs, completingRunner(dirs));
    const { taskId } = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await until(async () => (await service.get(taskId)).state === 'completed');
    expect((await service.cancel(taskId)).state).toBe('completed');
    await expect(service.cancel('investigate-0000')).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe('TaskService.recover', () => {
  it('resumes a task left running once, and fails it when it was already resumed', async () => {
    const first = makeService(dirs, blockingRunner());
    const { taskId } = await first.service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await until(async () => (await first.service.get(taskId)).state === 'candidates_running');
    await first.service.shutdown();
    expect((await first.store.getTask(taskId))?.state).toBe('candidates_running');

    // A new service over the same store (a restarted daemon).
    const runner = blockingRunner();
    const second = makeService(dirs, runner, { store: first.store });
    expect(await second.service.recover()).toEqual({ resumed: [taskId], failed: [] });
    const ctx = await runner.started;
    expect(ctx.resume).toBe(true);
    await second.service.shutdown();

    const third = makeService(dirs, blockingRunner(), { store: first.store });
    expect(await third.service.recover()).toEqual({ resumed: [], failed: [taskId] });
    expect((await first.store.getTask(taskId))?.error).toMatchObject({ code: 'supervisor_restarted' });
  });

  it('a task that had only been queued is started again without using up its resume', async () => {
    // A dispatcher that never starts anything: the task stays queued until the "restart".
    const parked: Dispatcher = { dispatch: () => undefined, drain: async () => undefined, running: 0, queued: 0 };
    const first = makeService(dirs, completingRunner(dirs), { dispatcher: parked });
    const { taskId } = await first.service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    // Never started (the dispatcher holds it): still initializing at the "restart".
    expect((await first.store.getTask(taskId))?.state).toBe('initializing');

    const runner = completingRunner(dirs);
    const second = makeService(dirs, runner, { store: first.store });
    expect(await second.service.recover()).toEqual({ resumed: [taskId], failed: [] });
    await until(async () => (await second.service.get(taskId)).state === 'completed');
    expect(runner.runs[0]?.resume).toBe(false);
    expect((await second.service.get(taskId)).resumeCount).toBe(0);
  });

  it('closes the attempts a stopped run left running before it fails the task (and seals it)', async () => {
    const first = makeService(dirs, blockingRunner());
    const { taskId } = await first.service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await until(async () => (await first.service.get(taskId)).state === 'candidates_running');
    await first.service.shutdown();
    first.store.tasks.set(taskId, { ...first.store.tasks.get(taskId)!, resumeCount: 1 });
    const order: string[] = [];
    const third = makeService(dirs, blockingRunner(), { store: first.store, onTerminal: async () => void order.push(`sealed after ${first.store.closedAttempts.length} close(s)`) });
    expect(await third.service.recover()).toEqual({ resumed: [], failed: [taskId] });
    expect(first.store.closedAttempts).toEqual([taskId]);
    expect(order).toEqual(['sealed after 1 close(s)']);
  });

  it('refuses new tasks after shutdown', async () => {
    const { service } = makeService(dirs, completingRunner(dirs));
    await service.shutdown();
    await expect(service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo })).rejects.toMatchObject({ code: 'shutting_down' });
  });
});

describe('TaskService on a full disk (docs/behaviour.md#b13)', () => {
  const enospc = (): Error => Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });

  it('sets a run that met a full disk aside and resumes it, without counting a resume, once space is back', async () => {
    let full = false; // submit checks too: the disk fills once the task runs
    let checks = 0;
    const runs: Array<{ resume: boolean }> = [];
    const runner: TaskRunner = {
      async run(ctx) {
        runs.push({ resume: ctx.resume });
        if (runs.length === 1) {
          full = true;
          await ctx.control.transition('candidates_running');
          throw new FusionError('child_failed', 'could not copy the outputs', { cause: enospc() });
        }
        // The resumed run continues from the state the first one reached.
        expect(ctx.task.state).toBe('candidates_running');
        for (const s of ['candidates_complete', 'evaluating', 'evaluation_complete', 'merging'] as const) await ctx.control.transition(s);
        await ctx.control.commit({ taskId: ctx.task.id, answerPath: join(dirs.base, 'a.md'), answerSha256: 'a'.repeat(64), answerBytes: 1, metadata: '{}', metadataSha256: 'b'.repeat(64), committedAt: new Date().toISOString() });
      },
    };
    const assertStorage = (): void => {
      checks++;
      if (full) throw new FusionError('storage_full', 'below the reserve');
    };
    const { service } = makeService(dirs, runner, { assertStorage });
    const { taskId } = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await until(() => checks >= 2, 5_000);
    expect((await service.get(taskId)).state).toBe('candidates_running');
    full = false;
    await until(async () => (await service.get(taskId)).state === 'completed', 10_000);
    expect(runs).toEqual([{ resume: false }, { resume: true }]);
    expect((await service.get(taskId)).resumeCount).toBe(0);
  });

  it('fails the task storage_full when the disk stays full past the wait', async () => {
    const runner: TaskRunner = {
      async run(ctx) {
        full = true;
        await ctx.control.transition('candidates_running');
        throw enospc();
      },
    };
    let full = false;
    const { service, store } = makeService(dirs, runner, { assertStorage: () => { if (full) throw new FusionError('storage_full', 'below the reserve'); }, storageWaitMs: 300 });
    const { taskId } = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await until(async () => (await service.get(taskId)).state === 'failed', 10_000);
    expect((await service.get(taskId)).error).toMatchObject({ code: 'storage_full', state: 'candidates_running' });
    expect(store.closedAttempts).toContain(taskId);
  });

  it('a sandbox cannot claim a full disk: a FusionError is judged by its code and cause, not its words', async () => {
    const runner: TaskRunner = {
      async run(ctx) {
        await ctx.control.transition('candidates_running');
        throw new FusionError('child_failed', 'candidate-1 failed (ENOSPC: database or disk is full)');
      },
    };
    const { service } = makeService(dirs, runner, { assertStorage: () => undefined });
    const { taskId } = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await until(async () => (await service.get(taskId)).state === 'failed');
    expect((await service.get(taskId)).error).toMatchObject({ code: 'child_failed' });
  });
});

describe('TaskService repository bundles (docs/operations.md#repository-bundles)', () => {
  const packed = { digest: 'b'.repeat(64), data: Buffer.from('tar'), entries: 1, files: 1, skipped: emptySkipReport() };
  function bundles(checkout: (digest: string) => Promise<string>) {
    const packs: PackRequest[] = [];
    return { packs, deps: { pack: async (req: PackRequest) => (packs.push(req), packed), checkout, maxBytes: 1024 } };
  }
  const queue = (): TaskQueue => ({ enqueue: async () => undefined, start: async () => undefined, removeWaiting: async () => undefined, close: async () => undefined, running: 0, queued: async () => 0 });
  const signals = { eventsCommitted: () => undefined, cancel: async () => undefined, subscribe: async () => undefined, close: async () => undefined } as unknown as ClusterSignals;

  it('outside cluster mode nothing is packed: the task has no bundle and runs over its path', async () => {
    const runner = completingRunner(dirs);
    const b = bundles(async () => '/never');
    const { service, store } = makeService(dirs, runner, { bundles: b.deps });
    const { taskId } = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await until(async () => (await service.get(taskId)).state === 'completed');
    expect(b.packs).toEqual([]);
    expect(store.tasks.get(taskId)?.bundleDigest).toBeNull();
    expect(runner.runs[0]?.task.repoDir).toBe(dirs.repo);
  });

  it('on a single host the repository is packed when the run starts (not at the receipt), as the recorded caller; the first transition records the digest and the run reads the tree', async () => {
    const runner = completingRunner(dirs);
    const installs: string[] = [];
    const pins: string[] = [];
    const deps = { ...bundles(async () => '/never').deps, install: async (b: { digest: string }) => (installs.push(b.digest), `/snap/${b.digest}`), pin: (d: string) => (pins.push(d), () => pins.splice(pins.indexOf(d), 1)) };
    const packs: PackRequest[] = [];
    deps.pack = async (req: PackRequest) => (packs.push(req), { ...packed, skipped: { ...emptySkipReport(), counts: { ...emptySkipReport().counts, secret: 1 }, paths: { ...emptySkipReport().paths, secret: ['.env'] } } });
    const { service, store } = makeService(dirs, runner, { bundles: deps, daemonUid: 0, checkRepo: async (repo) => repo });
    const identity = { uid: 4242, gid: 4243, pid: 1, groups: [4243, 77] };
    const { taskId } = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo, identity, caller: 'uid:4242' });
    await until(async () => (await service.get(taskId)).state === 'completed');
    expect(packs).toHaveLength(1);
    expect(packs[0]).toMatchObject({ repo: dirs.repo, exclude: DEFAULT_REPO_EXCLUDES, caller: { uid: 4242, gid: 4243, groups: [4243, 77] } });
    expect(installs).toEqual([packed.digest]);
    expect(store.tasks.get(taskId)?.bundleDigest).toBe(packed.digest);
    expect(runner.runs[0]?.task.repoDir).toBe(`/snap/${packed.digest}`);
    expect(runner.runs[0]?.repository?.skipped.paths.secret).toEqual(['.env']);
    expect(pins).toEqual([]);
    expect(store.tasks.get(taskId)?.repoDir).toBe(dirs.repo);
  });

  it('a resumed single-host task runs over the snapshot it started with, and fails repo_snapshot_missing when that tree is gone (never re-reading the repository)', async () => {
    const runner = completingRunner(dirs);
    const packs: PackRequest[] = [];
    let present = true;
    const deps = {
      pack: async (req: PackRequest) => (packs.push(req), packed), maxBytes: 1024, install: async (b: { digest: string }) => `/snap/${b.digest}`,
      checkout: async (digest: string) => {
        if (!present) throw new FusionError('repo_snapshot_missing', 'gone');
        return `/snap/${digest}`;
      },
    };
    const { service, store } = makeService(dirs, runner, { bundles: deps });
    const make = async (): Promise<string> => {
      const t = await store.createTask({ id: `investigate-${Math.random().toString(16).slice(2)}`, workflow: 'investigate', repoDir: dirs.repo, canonicalInput: '{}', canonicalInputSha256: 'c'.repeat(64), budgetPlan: '{}', options: {}, callerUid: null });
      // (Queued, so the fake runner's transitions apply; a real run records the digest on its first transition.)
      await store.transitionTask(t.id, 'initializing', 'queued', { bundleDigest: packed.digest });
      await store.saveCheckpoint(t.id, 'repo-snapshot', JSON.stringify({ digest: packed.digest, entries: 1, skipped: emptySkipReport() }));
      return t.id;
    };
    const resumed = await make();
    await service.recover();
    await until(async () => (await service.get(resumed)).state === 'completed');
    expect(packs).toHaveLength(0);
    expect(runner.runs.at(-1)?.task.repoDir).toBe(`/snap/${packed.digest}`);
    present = false;
    const lost = await make();
    await service.recover();
    await until(async () => (await service.get(lost)).state === 'failed');
    expect((await service.get(lost)).error?.code).toBe('repo_snapshot_missing');
    expect(packs).toHaveLength(0);
  });

  it('in cluster mode the repository is packed with the caller\'s excludes (default .git/), stored with the task, and the run uses the checked-out tree', async () => {
    const runner = completingRunner(dirs);
    const b = bundles(async (digest) => `/cache/${digest}`);
    const { service, store } = makeService(dirs, runner, { bundles: b.deps, cluster: { queue: queue(), signals, daemonId: 'd' } });
    const { taskId } = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo, options: { repoExclude: ['*.log'] } });
    expect(b.packs.map((p) => p.exclude)).toEqual([DEFAULT_REPO_EXCLUDES, ['*.log']]);
    expect(b.packs[0]).toMatchObject({ repo: dirs.repo, maxBytes: 1024 });
    expect(b.packs[0]?.caller).toBeUndefined();
    expect(store.tasks.get(taskId)?.bundleDigest).toBe(packed.digest);
    expect((await store.getRepoBundle(packed.digest))?.data.toString()).toBe('tar');
    await service.runQueued({ taskId, signal: new AbortController().signal });
    expect((await service.get(taskId)).state).toBe('completed');
    expect(runner.runs[0]?.task.repoDir).toBe(`/cache/${packed.digest}`);
    // The record keeps the submitter's path; only the run sees the tree.
    expect(store.tasks.get(taskId)?.repoDir).toBe(dirs.repo);
  });

  it('a bundle that fails verification fails the task with bundle_changed and the runner never starts', async () => {
    const runner = completingRunner(dirs);
    const b = bundles(async () => {
      throw new FusionError('bundle_changed', 'bytes changed');
    });
    const { service } = makeService(dirs, runner, { bundles: b.deps, cluster: { queue: queue(), signals, daemonId: 'd' } });
    const { taskId } = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await service.runQueued({ taskId, signal: new AbortController().signal });
    const task = await service.get(taskId);
    expect(task.state).toBe('failed');
    expect(task.error?.code).toBe('bundle_changed');
    expect(runner.runs).toHaveLength(0);
  });
});
