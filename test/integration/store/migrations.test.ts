/** Numbered migrations: idempotent, transactional, and refusing a newer database. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FusionError } from '../../../src/errors.js';
import { silentLogger } from '../../../src/log.js';
import { LATEST_SCHEMA_VERSION, MIGRATIONS, migrate } from '../../../src/store/migrations.js';
import { SqliteDb } from '../../../src/store/sqlite-db.js';
import { openStore, tempDir, type TempDir } from './helpers.js';

let tmp: TempDir;

beforeEach(async () => {
  tmp = await tempDir();
});

afterEach(async () => {
  await tmp.cleanup();
});

async function withDb<T>(fn: (db: SqliteDb) => Promise<T>): Promise<T> {
  const db = await SqliteDb.open(tmp.file, silentLogger());
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

async function rejection(promise: Promise<unknown>): Promise<FusionError> {
  const err: unknown = await promise.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(FusionError);
  return err as FusionError;
}

describe('migrations', () => {
  it('are numbered 1..n', () => {
    // Not a literal: every new migration would have to edit this line (and conflict with others').
    expect(MIGRATIONS.map((m) => m.version)).toEqual(Array.from({ length: MIGRATIONS.length }, (_, i) => i + 1));
    expect(LATEST_SCHEMA_VERSION).toBe(MIGRATIONS.length);
  });

  it('create every table once and are idempotent across opens', async () => {
    for (let i = 0; i < 2; i += 1) {
      const store = await openStore(tmp.file);
      await store.init();
      await store.close();
    }
    await withDb(async (db) => {
      const versions = await db.all<{ version: number; name: string }>('SELECT version, name FROM schema_migrations ORDER BY version');
      expect(versions).toEqual(MIGRATIONS.map((m) => ({ version: m.version, name: m.name })));
      const tables = await db.all<{ name: string }>(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
      );
      expect(tables.map((t) => t.name)).toEqual([
        'api_keys', 'attempts', 'checkpoints', 'research_documents', 'research_runs', 'research_snapshots', 'results',
        'schema_migrations', 'task_events', 'task_tarballs', 'tasks',
      ]);
      const indexes = await db.all<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name");
      expect(indexes.map((i) => i.name)).toEqual(['research_documents_run', 'research_runs_status', 'task_events_task_seq', 'tasks_caller_created', 'tasks_state']);
      expect(await migrate(db, silentLogger())).toEqual({ from: LATEST_SCHEMA_VERSION, to: LATEST_SCHEMA_VERSION, applied: [] });
    });
  });

  it('refuses a database whose schema is newer than the code', async () => {
    await (await openStore(tmp.file)).close();
    const future = LATEST_SCHEMA_VERSION + 1;
    await withDb((db) => db.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'future', 'x')", [future]));
    const err = await rejection(openStore(tmp.file));
    expect(err.code).toBe('store_error');
    expect(err.message).toContain(`schema version ${future} is newer than this fusion build knows (${LATEST_SCHEMA_VERSION})`);
    expect(err.retryable).toBe(false);
  });

  it('apply each migration atomically with its version row', async () => {
    const broken = [...MIGRATIONS, { version: LATEST_SCHEMA_VERSION + 1, name: 'broken', sql: 'CREATE TABLE half (x); CREATE TABLE half (y);' }];
    await withDb(async (db) => {
      const err = await rejection(migrate(db, silentLogger(), broken));
      expect(err.code).toBe('store_error');
      expect(await db.get("SELECT name FROM sqlite_master WHERE name = 'half'")).toBeUndefined();
      expect(await db.get<{ v: number }>('SELECT MAX(version) AS v FROM schema_migrations')).toEqual({ v: LATEST_SCHEMA_VERSION });
    });
  });

  it('reject a list with a gap in its numbering', async () => {
    const gapped = [...MIGRATIONS, { version: LATEST_SCHEMA_VERSION + 2, name: 'gap', sql: 'SELECT 1' }];
    await withDb(async (db) => {
      expect((await rejection(migrate(db, silentLogger(), gapped))).code).toBe('internal_error');
    });
  });
});
