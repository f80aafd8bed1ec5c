/** Numbered migrations, on both engines: idempotent, transactional, and refusing a newer database. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FusionError } from '../../../src/errors.js';
import { silentLogger } from '../../../src/log.js';
import { LATEST_SCHEMA_VERSION, MIGRATIONS, migrate } from '../../../src/store/migrations.js';
import type { SqlDb } from '../../../src/store/sql-port.js';
import { useStoreAdapters, type TestDatabase } from './helpers.js';

const adapters = useStoreAdapters();

async function rejection(promise: Promise<unknown>): Promise<FusionError> {
  const err: unknown = await promise.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(FusionError);
  return err as FusionError;
}

describe('migrations', () => {
  it('are numbered 1..n, each with its SQLite and PostgreSQL text', () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(ALL_VERSIONS);
    // Not a literal: every new migration would have to edit this line (and conflict with others').
    expect(LATEST_SCHEMA_VERSION).toBe(MIGRATIONS.length);
    for (const m of MIGRATIONS) {
      expect(m.sqlite.trim()).not.toBe('');
      expect(m.postgres.trim()).not.toBe('');
    }
  });
});

const ALL_VERSIONS = MIGRATIONS.map((_m, i) => i + 1);

const TABLES = [
  'api_keys', 'attempts', 'checkpoints', 'cluster_settings', 'repo_bundles', 'research_documents', 'research_runs', 'research_snapshots', 'results',
  'schema_migrations', 'task_events', 'task_tarballs', 'tasks',
];
const INDEXES = ['research_documents_run', 'research_runs_status', 'task_events_task_seq', 'tasks_bundle_digest', 'tasks_caller_created', 'tasks_state'];

/** Tables and named (non-key) indexes as the engine's catalogue lists them. */
async function catalogue(db: SqlDb): Promise<{ tables: string[]; indexes: string[] }> {
  if (db.engine === 'sqlite') {
    const tables = await db.all<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
    const indexes = await db.all<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name");
    return { tables: tables.map((t) => t.name), indexes: indexes.map((i) => i.name) };
  }
  const tables = await db.all<{ name: string }>("SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename");
  const indexes = await db.all<{ name: string }>(
    "SELECT indexname AS name FROM pg_indexes WHERE schemaname = 'public' AND indexname NOT LIKE '%_pkey' AND indexname NOT LIKE '%_key' ORDER BY indexname",
  );
  return { tables: tables.map((t) => t.name), indexes: indexes.map((i) => i.name) };
}

describe.each(adapters)('$engine migrations', (adapter) => {
  let tdb: TestDatabase;

  beforeEach(async () => {
    tdb = await adapter.newDatabase();
  });

  afterEach(async () => {
    await tdb.cleanup();
  });

  async function withDb<T>(fn: (db: SqlDb) => Promise<T>): Promise<T> {
    const db = await tdb.openDb();
    try {
      return await fn(db);
    } finally {
      await db.close();
    }
  }

  it('create every table once and are idempotent across opens', async () => {
    for (let i = 0; i < 2; i += 1) {
      const store = await tdb.open();
      await store.init();
      await store.close();
    }
    await withDb(async (db) => {
      const versions = await db.all<{ version: number; name: string }>('SELECT version, name FROM schema_migrations ORDER BY version');
      expect(versions).toEqual(MIGRATIONS.map((m) => ({ version: m.version, name: m.name })));
      expect(await catalogue(db)).toEqual({ tables: TABLES, indexes: INDEXES });
      expect(await migrate(db, silentLogger())).toEqual({ from: LATEST_SCHEMA_VERSION, to: LATEST_SCHEMA_VERSION, applied: [] });
    });
  });

  it('migrate once when several processes open a new database at the same time', async () => {
    const dbs = await Promise.all([1, 2, 3].map(() => tdb.openDb()));
    try {
      const outcomes = await Promise.all(dbs.map((db) => migrate(db, silentLogger())));
      expect(outcomes.flatMap((o) => o.applied).sort((a, b) => a - b)).toEqual(ALL_VERSIONS);
    } finally {
      await Promise.all(dbs.map((db) => db.close()));
    }
  });

  it('refuses a database whose schema is newer than the code', async () => {
    await (await tdb.open()).close();
    const future = LATEST_SCHEMA_VERSION + 1;
    await withDb((db) => db.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'future', 'x')", [future]));
    const err = await rejection(tdb.open());
    expect(err.code).toBe('store_error');
    expect(err.message).toContain(`schema version ${future} is newer than this fusion build knows (${LATEST_SCHEMA_VERSION})`);
    expect(err.retryable).toBe(false);
  });

  it('apply each migration atomically with its version row', async () => {
    const half = 'CREATE TABLE half (x INTEGER); CREATE TABLE half (y INTEGER);';
    const broken = [...MIGRATIONS, { version: LATEST_SCHEMA_VERSION + 1, name: 'broken', sqlite: half, postgres: half }];
    await withDb(async (db) => {
      const err = await rejection(migrate(db, silentLogger(), broken));
      expect(err.code).toBe('store_error');
      expect((await catalogue(db)).tables).not.toContain('half');
      expect(await db.get<{ v: number }>('SELECT MAX(version) AS v FROM schema_migrations')).toEqual({ v: LATEST_SCHEMA_VERSION });
    });
  });

  it('reject a list with a gap in its numbering', async () => {
    const gapped = [...MIGRATIONS, { version: LATEST_SCHEMA_VERSION + 2, name: 'gap', sqlite: 'SELECT 1', postgres: 'SELECT 1' }];
    await withDb(async (db) => {
      expect((await rejection(migrate(db, silentLogger(), gapped))).code).toBe('internal_error');
    });
  });
});
