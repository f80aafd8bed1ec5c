/**
 * Flat memory: the task service's per-task bookkeeping (run controllers, queued marks,
 * waiting places, bus publish cursors, bus listeners) is empty again once the tasks ended, however
 * they ended, so a long-running daemon holds nothing per finished task.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FusionError } from '../../../src/errors.js';
import type { TaskEvent } from '../../../src/store/port.js';
import type { TaskRunner } from '../../../src/tasks/runner-port.js';
import { MAX_ENDED_CURSORS, type TaskService } from '../../../src/tasks/task-service.js';
import { completingRunner, INVESTIGATE_ARGS, makeDirs, makeService, until, type Dirs } from '../fakes/task-fixtures.js';

let dirs: Dirs;
beforeEach(() => {
  dirs = makeDirs();
});
afterEach(() => dirs.remove());

type Tracked = 'controllers' | 'waiting' | 'published' | 'endedCursors';

/** The per-task maps of the service and its admission and event parts (private: read through a cast, for this check only). */
function maps(service: TaskService): Record<Tracked, Map<string, unknown>> {
  type Parts = Record<'controllers', Map<string, unknown>> & { admission: { waiting: Map<string, unknown> }; events: Record<'published' | 'endedCursors', Map<string, unknown>> };
  const s = service as unknown as Parts;
  return { controllers: s.controllers, waiting: s.admission.waiting, published: s.events.published, endedCursors: s.events.endedCursors };
}

/** Sizes of the maps that must be empty when no task runs (ended cursors are bounded instead). */
function bookkeeping(service: TaskService): Record<string, number> {
  const s = maps(service);
  return { controllers: s.controllers.size, waiting: s.waiting.size, published: s.published.size };
}

const EMPTY = { controllers: 0, waiting: 0, published: 0 };

/** Like a workflow whose stage reports its end after the task was cancelled under it. */
function lateProgressRunner(): TaskRunner & { started: Promise<void> } {
  let started!: () => void;
  const startedP = new Promise<void>((r) => (started = r));
  return {
    started: startedP,
    async run({ control, signal }) {
      await control.transition('candidates_running');
      started();
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      // Committed after the terminal event of the cancel.
      await control.progress({ stage: 'candidate-1', event: 'ended', outcome: 'aborted' });
      throw new FusionError('cancelled', 'stopped');
    },
  };
}

describe('per-task bookkeeping of the task service', () => {
  it('is empty after completed tasks, and the bus has no listener left from a waiter', async () => {
    const { service, bus } = makeService(dirs, completingRunner(dirs), { admission: { concurrency: 1, maxQueued: 100, maxQueuedPerCaller: 100 } });
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push((await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo })).taskId);
    const unsubscribe = ids.map((id) => bus.subscribe(id, () => undefined));
    for (const id of ids) await until(async () => (await service.get(id)).state === 'completed');
    await until(() => bookkeeping(service).published === 0);
    for (const u of unsubscribe) u();
    expect(bookkeeping(service)).toEqual(EMPTY);
    expect((bus as unknown as { emitter: { eventNames(): unknown[] } }).emitter.eventNames()).toEqual([]);
  });

  it('keeps the cursors of ended tasks bounded, newest kept', async () => {
    const { service } = makeService(dirs, completingRunner(dirs));
    const ids: string[] = [];
    for (let i = 0; i < MAX_ENDED_CURSORS + 20; i++) ids.push((await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo })).taskId);
    for (const id of ids) await until(async () => (await service.get(id)).state === 'completed');
    await until(() => bookkeeping(service).published === 0);
    expect(bookkeeping(service)).toEqual(EMPTY);
    const ended = maps(service).endedCursors;
    expect(ended.size).toBe(MAX_ENDED_CURSORS);
    expect(ended.has(ids[0]!)).toBe(false);
    expect(ended.has(ids.at(-1)!)).toBe(true);
  });

  it('is empty after a cancelled task whose run committed an event after the terminal one, and that event is not published twice', async () => {
    const runner = lateProgressRunner();
    const { service, bus, store } = makeService(dirs, runner);
    const seen: TaskEvent[] = [];
    bus.subscribe('*', (e) => seen.push(e));
    const { taskId } = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await runner.started;
    expect((await service.cancel(taskId)).state).toBe('cancelled');
    await until(() => store.events.some((e) => e.taskId === taskId && e.kind === 'progress'));
    await until(() => service.runningTaskIds().size === 0);
    // The run's last cleanup may settle a tick after it leaves the running set: wait on the state.
    await until(() => JSON.stringify(bookkeeping(service)) === JSON.stringify(EMPTY)).catch(() => undefined);
    expect(bookkeeping(service)).toEqual(EMPTY);
    // Every committed event reached the bus exactly once (none re-published from the start).
    const seqs = seen.filter((e) => e.taskId === taskId).map((e) => e.seq);
    expect(seqs).toEqual(store.events.filter((e) => e.taskId === taskId).map((e) => e.seq));
  });

  it('is empty after a task cancelled while it waited for a run slot', async () => {
    const runner = lateProgressRunner();
    const { service } = makeService(dirs, runner, { admission: { concurrency: 1, maxQueued: 100, maxQueuedPerCaller: 100 } });
    const first = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    await runner.started;
    const second = await service.submit({ workflow: 'investigate', arguments: INVESTIGATE_ARGS, repo: dirs.repo });
    expect((await service.cancel(second.taskId)).state).toBe('cancelled');
    expect((await service.cancel(first.taskId)).state).toBe('cancelled');
    await until(() => service.runningTaskIds().size === 0);
    // The run's last cleanup may settle a tick after it leaves the running set: wait on the state.
    await until(() => JSON.stringify(bookkeeping(service)) === JSON.stringify(EMPTY)).catch(() => undefined);
    expect(bookkeeping(service)).toEqual(EMPTY);
  });
});
