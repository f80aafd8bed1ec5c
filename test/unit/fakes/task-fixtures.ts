/**
 * Builders for unit tests of the task layer and the routes: a task service over the in-memory
 * store, a runner that drives a task through every state and commits a verifiable answer, and
 * temporary repository / data directories. No daemon, no sandbox, no SQLite.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { waitFor } from '../../helpers/wait.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sha256Hex } from '../../../src/contracts/sha256.js';
import { FusionError } from '../../../src/errors.js';
import { silentLogger } from '../../../src/log.js';
import { createDirectDispatcher, type Dispatcher } from '../../../src/tasks/dispatcher.js';
import { TaskEventBus } from '../../../src/tasks/event-bus.js';
import type { TaskRunContext, TaskRunner } from '../../../src/tasks/runner-port.js';
import { TaskService, type TaskServiceDeps } from '../../../src/tasks/task-service.js';
import { memoryStore, type MemoryStore } from './memory-store.js';

export const INVESTIGATE_ARGS = { objective: ' find risk ', background: [' repo changed '], deliverable: ' report ' };

export interface Dirs {
  base: string;
  repo: string;
  tasksDir: string;
  remove(): void;
}

export function makeDirs(): Dirs {
  const base = mkdtempSync(join(tmpdir(), 'fusion-unit-tasks-'));
  const repo = join(base, 'repo');
  const tasksDir = join(base, 'data', 'tasks');
  mkdirSync(repo);
  mkdirSync(tasksDir, { recursive: true });
  writeFileSync(join(repo, 'README.md'), 'hello\n');
  return { base, repo, tasksDir, remove: () => rmSync(base, { recursive: true, force: true }) };
}

/** Commits `answer` after walking every state, like the workflow does. */
export function completingRunner(dirs: Dirs, answer = 'The answer.\n', extraMetadata: Record<string, unknown> = {}): TaskRunner & { runs: TaskRunContext[] } {
  const runs: TaskRunContext[] = [];
  return {
    runs,
    async run(ctx) {
      runs.push(ctx);
      const { task, control } = ctx;
      for (const s of ['candidates_running', 'candidates_complete', 'evaluating', 'evaluation_complete', 'merging'] as const) await control.transition(s);
      const answerPath = join(dirs.base, `${task.id}.md`);
      writeFileSync(answerPath, answer);
      const metadata = JSON.stringify({ engine: 'fake', answer_sha256: sha256Hex(answer), ...extraMetadata });
      await control.commit({
        taskId: task.id,
        answerPath,
        answerSha256: sha256Hex(answer),
        answerBytes: Buffer.byteLength(answer),
        metadata,
        metadataSha256: sha256Hex(metadata),
        committedAt: new Date().toISOString(),
      });
    },
  };
}

/** Waits on the signal until aborted, then throws the way a stopped workflow does. */
export function blockingRunner(): TaskRunner & { started: Promise<TaskRunContext> } {
  let started!: (ctx: TaskRunContext) => void;
  const startedP = new Promise<TaskRunContext>((r) => (started = r));
  return {
    started: startedP,
    async run(ctx) {
      started(ctx);
      await ctx.control.transition('candidates_running');
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
      throw new FusionError('cancelled', 'stopped');
    },
  };
}

export interface Harness {
  service: TaskService;
  store: MemoryStore;
  bus: TaskEventBus;
  dispatcher: Dispatcher;
}

export function makeService(dirs: Dirs, runner: TaskRunner, extra: Partial<TaskServiceDeps> = {}): Harness {
  const store = extra.store === undefined ? memoryStore() : (extra.store as MemoryStore);
  const bus = new TaskEventBus();
  const dispatcher = extra.dispatcher ?? createDirectDispatcher(2);
  const service = new TaskService({ store, bus, dispatcher, runner, log: silentLogger(), tasksDir: dirs.tasksDir, cancelSettleMs: 2_000, ...extra });
  return { service, store, bus, dispatcher };
}

/** Waits until `check` holds (test/helpers/wait.ts). */
export async function until(check: () => boolean | Promise<boolean>, ms = 5_000): Promise<void> {
  await waitFor('the condition', check, ms, 5);
}
