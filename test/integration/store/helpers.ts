/** Shared fixtures for the SQLite store tests: a fresh temp dir per test and task factories. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../../src/log.js';
import { openSqliteStore, type SqliteStore } from '../../../src/store/sqlite-store.js';
import type { NewTask } from '../../../src/store/port.js';
import type { TaskState } from '../../../src/contracts/task-state.js';

export interface TempDir {
  dir: string;
  file: string;
  cleanup(): Promise<void>;
}

export async function tempDir(): Promise<TempDir> {
  const dir = await mkdtemp(join(tmpdir(), 'fusion-store-'));
  return { dir, file: join(dir, 'fusion.db'), cleanup: () => rm(dir, { recursive: true, force: true }) };
}

export function openStore(file: string): Promise<SqliteStore> {
  return openSqliteStore({ file, log: silentLogger() });
}

let counter = 0;

export function newTask(overrides: Partial<NewTask> = {}): NewTask {
  counter += 1;
  return {
    id: `task_${counter.toString().padStart(4, '0')}`,
    workflow: 'investigate',
    repoDir: '/srv/repo',
    canonicalInput: '{"request":"where is main?"}',
    canonicalInputSha256: 'a'.repeat(64),
    budgetPlan: '{"promptTokens":1000}',
    options: '{"sandbox":"bwrap"}',
    callerUid: null,
    ...overrides,
  };
}

/** The happy path up to `merging`, through the real transition table. */
export const PATH_TO_MERGING: readonly TaskState[] = [
  'initializing', 'candidates_running', 'candidates_complete', 'evaluating', 'evaluation_complete', 'merging',
];

export async function driveTo(store: SqliteStore, id: string, target: TaskState): Promise<void> {
  for (let i = 1; i < PATH_TO_MERGING.length; i += 1) {
    const from = PATH_TO_MERGING[i - 1];
    const to = PATH_TO_MERGING[i];
    if (from === undefined || to === undefined) throw new Error('bad path');
    if (from === target) return;
    const moved = await store.transitionTask(id, from, to);
    if (moved === null) throw new Error(`could not move ${id} to ${to}`);
    if (to === target) return;
  }
}
