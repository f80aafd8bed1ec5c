/**
 * Shared fixtures for the store tests: a fresh temp dir per test, task factories, and the
 * adapters the conformance suite runs against (SQLite always; PostgreSQL on a throwaway server,
 * see test/fixtures/postgres-server.ts).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { openSqliteStore, openConfiguredDb, type SqliteStore } from '../../../src/store/sqlite-store.js';
import { openResearchSqliteStore } from '../../../src/store/research-sqlite-store.js';
import { openPgStore, openResearchPgStore } from '../../../src/store/pg-store.js';
import { PgDb } from '../../../src/store/pg-db.js';
import type { NewTask, Store } from '../../../src/store/port.js';
import type { ApiKeyStore, ResearchRunStore } from '../../../src/store/research-port.js';
import type { SqlDb } from '../../../src/store/sql-port.js';
import type { TaskState } from '../../../src/contracts/task-state.js';
import { postgresAvailable, startPostgres, type PostgresServer } from '../../setup/postgres-server.js';

/** One empty database of one engine, for one test. */
export interface TestDatabase {
  /** The SQLite file or the PostgreSQL URL. */
  location: string;
  open(): Promise<Store>;
  openResearch(): Promise<ResearchRunStore & ApiKeyStore>;
  /** A raw connection (migration tests). */
  openDb(): Promise<SqlDb>;
  cleanup(): Promise<void>;
}

export interface StoreAdapter {
  engine: 'sqlite' | 'postgres';
  newDatabase(): Promise<TestDatabase>;
}

const sqliteAdapter: StoreAdapter = {
  engine: 'sqlite',
  async newDatabase() {
    const tmp = await tempDir();
    return {
      location: tmp.file,
      open: () => openStore(tmp.file),
      openResearch: () => openResearchSqliteStore({ file: tmp.file, log: silentLogger() }),
      openDb: () => openConfiguredDb(tmp.file, silentLogger()),
      cleanup: tmp.cleanup,
    };
  },
};

/**
 * The adapters of the conformance suite, for `describe.each`. Call at the top level of a test
 * file: it starts the file's PostgreSQL server before its tests and stops it after.
 */
export function useStoreAdapters(): StoreAdapter[] {
  if (!postgresAvailable()) return [sqliteAdapter];
  let server: PostgresServer | undefined;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });
  const pgAdapter: StoreAdapter = {
    engine: 'postgres',
    async newDatabase() {
      if (server === undefined) throw new Error('the PostgreSQL server is not started (useStoreAdapters at top level)');
      const url = await server.createDatabase();
      return {
        location: url,
        open: () => openPgStore({ url, log: silentLogger(), maxConnections: 4 }),
        openResearch: () => openResearchPgStore({ url, log: silentLogger(), maxConnections: 4 }),
        openDb: () => PgDb.open(url, silentLogger(), { maxConnections: 2 }),
        cleanup: async () => undefined,
      };
    },
  };
  return [sqliteAdapter, pgAdapter];
}

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
    options: { sandbox: 'bwrap' },
    callerUid: null,
    ...overrides,
  };
}

/** The happy path up to `merging`, through the real transition table. */
export const PATH_TO_MERGING: readonly TaskState[] = [
  'initializing', 'candidates_running', 'candidates_complete', 'evaluating', 'evaluation_complete', 'merging',
];

export async function driveTo(store: Store, id: string, target: TaskState): Promise<void> {
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
