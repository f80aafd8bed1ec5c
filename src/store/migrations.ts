/**
 * Numbered schema migrations, one list for both engines: each number carries its SQLite and its
 * PostgreSQL text, which build the same tables and columns (PostgreSQL's tables that the store
 * orders by insertion get an explicit `rowid` column, SQLite's implicit one). A migration, once
 * released, is never edited: a change is a new number. Each one runs in its own transaction
 * together with its `schema_migrations` row, so a crash leaves the schema at a whole version. A
 * database newer than this code is refused: running old code over a newer schema could silently
 * drop data the newer code relies on.
 */
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import type { SqlDb, SqlEngine, SqlExecutor } from './sql-port.js';

export interface Migration {
  version: number;
  name: string;
  sqlite: string;
  postgres: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'tasks',
    sqlite: `
      CREATE TABLE tasks (
        id TEXT PRIMARY KEY NOT NULL,
        workflow TEXT NOT NULL,
        state TEXT NOT NULL,
        repo_dir TEXT NOT NULL,
        canonical_input TEXT NOT NULL,
        canonical_input_sha256 TEXT NOT NULL,
        budget_plan TEXT NOT NULL,
        options TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        error_code TEXT,
        error_message TEXT,
        error_state TEXT,
        usage TEXT,
        usage_delivered INTEGER NOT NULL DEFAULT 0 CHECK (usage_delivered IN (0, 1)),
        resume_count INTEGER NOT NULL DEFAULT 0
      );
      CREATE INDEX tasks_state ON tasks(state);

      CREATE TABLE task_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        at TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('transition', 'progress', 'terminal')),
        data TEXT NOT NULL CHECK (json_valid(data))
      );
      CREATE INDEX task_events_task_seq ON task_events(task_id, seq);

      CREATE TABLE checkpoints (
        task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (task_id, key)
      );

      CREATE TABLE attempts (
        task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        stage TEXT NOT NULL,
        attempt INTEGER NOT NULL CHECK (attempt >= 1),
        status TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
        started_at TEXT NOT NULL,
        ended_at TEXT,
        detail TEXT,
        tarball_path TEXT,
        tarball_sha256 TEXT,
        PRIMARY KEY (task_id, stage, attempt)
      );

      CREATE TABLE results (
        task_id TEXT PRIMARY KEY NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        answer_path TEXT NOT NULL,
        answer_sha256 TEXT NOT NULL,
        answer_bytes INTEGER NOT NULL CHECK (answer_bytes >= 0),
        metadata TEXT NOT NULL,
        metadata_sha256 TEXT NOT NULL,
        committed_at TEXT NOT NULL
      );
    `,
    postgres: `
      CREATE TABLE tasks (
        id TEXT PRIMARY KEY NOT NULL,
        rowid BIGSERIAL NOT NULL,
        workflow TEXT NOT NULL,
        state TEXT NOT NULL,
        repo_dir TEXT NOT NULL,
        canonical_input TEXT NOT NULL,
        canonical_input_sha256 TEXT NOT NULL,
        budget_plan TEXT NOT NULL,
        options TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        error_code TEXT,
        error_message TEXT,
        error_state TEXT,
        usage TEXT,
        usage_delivered INTEGER NOT NULL DEFAULT 0 CHECK (usage_delivered IN (0, 1)),
        resume_count INTEGER NOT NULL DEFAULT 0
      );
      CREATE INDEX tasks_state ON tasks(state);

      CREATE TABLE task_events (
        seq BIGSERIAL PRIMARY KEY,
        task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        at TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('transition', 'progress', 'terminal')),
        data TEXT NOT NULL CHECK (data::json IS NOT NULL)
      );
      CREATE INDEX task_events_task_seq ON task_events(task_id, seq);

      CREATE TABLE checkpoints (
        task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (task_id, key)
      );

      CREATE TABLE attempts (
        task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        rowid BIGSERIAL NOT NULL,
        stage TEXT NOT NULL,
        attempt INTEGER NOT NULL CHECK (attempt >= 1),
        status TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
        started_at TEXT NOT NULL,
        ended_at TEXT,
        detail TEXT,
        tarball_path TEXT,
        tarball_sha256 TEXT,
        PRIMARY KEY (task_id, stage, attempt)
      );

      CREATE TABLE results (
        task_id TEXT PRIMARY KEY NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        answer_path TEXT NOT NULL,
        answer_sha256 TEXT NOT NULL,
        answer_bytes BIGINT NOT NULL CHECK (answer_bytes >= 0),
        metadata TEXT NOT NULL,
        metadata_sha256 TEXT NOT NULL,
        committed_at TEXT NOT NULL
      );
    `,
  },
  {
    version: 2,
    name: 'research',
    sqlite: `
      CREATE TABLE research_runs (
        id TEXT PRIMARY KEY NOT NULL,
        workspace_id TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        payload_sha256 TEXT NOT NULL,
        query TEXT NOT NULL,
        source_urls TEXT NOT NULL CHECK (json_valid(source_urls)),
        limits TEXT NOT NULL CHECK (json_valid(limits)),
        status TEXT NOT NULL,
        error TEXT,
        result_document_id TEXT,
        cancel_requested_at TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (workspace_id, idempotency_key)
      );

      CREATE TABLE research_documents (
        id TEXT PRIMARY KEY NOT NULL,
        run_id TEXT REFERENCES research_runs(id) ON DELETE CASCADE,
        workspace_id TEXT NOT NULL,
        name TEXT NOT NULL,
        mime_type TEXT NOT NULL,
        tags TEXT NOT NULL CHECK (json_valid(tags)),
        source_uri TEXT NOT NULL,
        indexing_status TEXT NOT NULL,
        status TEXT NOT NULL,
        enabled INTEGER NOT NULL CHECK (enabled IN (0, 1)),
        content TEXT NOT NULL,
        created_at TEXT NOT NULL
      );

      CREATE TABLE research_snapshots (
        run_id TEXT NOT NULL REFERENCES research_runs(id) ON DELETE CASCADE,
        url TEXT NOT NULL,
        canonical_url TEXT NOT NULL,
        final_url TEXT,
        http_status INTEGER,
        content_type TEXT,
        bytes INTEGER,
        sha256 TEXT,
        content TEXT,
        fetched_at TEXT NOT NULL,
        PRIMARY KEY (run_id, canonical_url)
      );

      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY NOT NULL,
        workspace_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('workspace', 'personal', 'copilot')),
        key_sha256 TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        revoked_at TEXT
      );
    `,
    postgres: `
      CREATE TABLE research_runs (
        id TEXT PRIMARY KEY NOT NULL,
        workspace_id TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        payload_sha256 TEXT NOT NULL,
        query TEXT NOT NULL,
        source_urls TEXT NOT NULL CHECK (source_urls::json IS NOT NULL),
        limits TEXT NOT NULL CHECK (limits::json IS NOT NULL),
        status TEXT NOT NULL,
        error TEXT,
        result_document_id TEXT,
        cancel_requested_at TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (workspace_id, idempotency_key)
      );

      CREATE TABLE research_documents (
        id TEXT PRIMARY KEY NOT NULL,
        run_id TEXT REFERENCES research_runs(id) ON DELETE CASCADE,
        workspace_id TEXT NOT NULL,
        name TEXT NOT NULL,
        mime_type TEXT NOT NULL,
        tags TEXT NOT NULL CHECK (tags::json IS NOT NULL),
        source_uri TEXT NOT NULL,
        indexing_status TEXT NOT NULL,
        status TEXT NOT NULL,
        enabled INTEGER NOT NULL CHECK (enabled IN (0, 1)),
        content TEXT NOT NULL,
        created_at TEXT NOT NULL
      );

      CREATE TABLE research_snapshots (
        run_id TEXT NOT NULL REFERENCES research_runs(id) ON DELETE CASCADE,
        rowid BIGSERIAL NOT NULL,
        url TEXT NOT NULL,
        canonical_url TEXT NOT NULL,
        final_url TEXT,
        http_status INTEGER,
        content_type TEXT,
        bytes BIGINT,
        sha256 TEXT,
        content TEXT,
        fetched_at TEXT NOT NULL,
        PRIMARY KEY (run_id, canonical_url)
      );

      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY NOT NULL,
        rowid BIGSERIAL NOT NULL,
        workspace_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('workspace', 'personal', 'copilot')),
        key_sha256 TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL,
        revoked_at TEXT
      );
    `,
  },
  {
    version: 3,
    name: 'task-tarballs',
    // One sealed tarball per terminal task, kept in the database itself so that a task's record
    // survives without its directory and any daemon reading the database can serve it.
    sqlite: `
      CREATE TABLE task_tarballs (
        task_id TEXT PRIMARY KEY NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        sha256 TEXT NOT NULL CHECK (length(sha256) = 64),
        bytes INTEGER NOT NULL CHECK (bytes >= 0),
        manifest_sha256 TEXT NOT NULL CHECK (length(manifest_sha256) = 64),
        signature TEXT,
        public_key_sha256 TEXT,
        created_at TEXT NOT NULL,
        data BLOB NOT NULL CHECK (length(data) = bytes)
      );
    `,
    postgres: `
      CREATE TABLE task_tarballs (
        task_id TEXT PRIMARY KEY NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
        sha256 TEXT NOT NULL CHECK (length(sha256) = 64),
        bytes BIGINT NOT NULL CHECK (bytes >= 0),
        manifest_sha256 TEXT NOT NULL CHECK (length(manifest_sha256) = 64),
        signature TEXT,
        public_key_sha256 TEXT,
        created_at TEXT NOT NULL,
        data BYTEA NOT NULL CHECK (octet_length(data) = bytes)
      );
    `,
  },
  {
    version: 4,
    name: 'research-run-details',
    // What the research service records beyond the columns of migration 2: the User-Agent the crawl
    // used, the crawl's robots.txt notes and skipped URLs, when it started and ended, and how
    // many times it was claimed (a retried queue job re-claims a run left running).
    sqlite: `
      ALTER TABLE research_runs ADD COLUMN user_agent TEXT;
      ALTER TABLE research_runs ADD COLUMN crawl_report TEXT CHECK (crawl_report IS NULL OR json_valid(crawl_report));
      ALTER TABLE research_runs ADD COLUMN started_at TEXT;
      ALTER TABLE research_runs ADD COLUMN finished_at TEXT;
      ALTER TABLE research_runs ADD COLUMN claims INTEGER NOT NULL DEFAULT 0;
      CREATE INDEX research_runs_status ON research_runs(status);
      CREATE INDEX research_documents_run ON research_documents(run_id);
    `,
    postgres: `
      ALTER TABLE research_runs ADD COLUMN user_agent TEXT;
      ALTER TABLE research_runs ADD COLUMN crawl_report TEXT CHECK (crawl_report IS NULL OR crawl_report::json IS NOT NULL);
      ALTER TABLE research_runs ADD COLUMN started_at TEXT;
      ALTER TABLE research_runs ADD COLUMN finished_at TEXT;
      ALTER TABLE research_runs ADD COLUMN claims INTEGER NOT NULL DEFAULT 0;
      CREATE INDEX research_runs_status ON research_runs(status);
      CREATE INDEX research_documents_run ON research_documents(run_id);
    `,
  },
  {
    version: 5,
    name: 'task-caller',
    // The uid of the socket caller that submitted the task (SO_PEERCRED), which alone (with root
    // and the daemon's uid) may see it. NULL for tasks from before callers were recorded: those
    // are visible to root and the daemon's uid only. The index serves `fusion tasks` per caller.
    sqlite: `
      ALTER TABLE tasks ADD COLUMN caller_uid INTEGER CHECK (caller_uid IS NULL OR caller_uid >= 0);
      CREATE INDEX tasks_caller_created ON tasks(caller_uid, created_at);
    `,
    postgres: `
      ALTER TABLE tasks ADD COLUMN caller_uid INTEGER CHECK (caller_uid IS NULL OR caller_uid >= 0);
      CREATE INDEX tasks_caller_created ON tasks(caller_uid, created_at);
    `,
  },
  {
    version: 6,
    name: 'cluster',
    // Cluster mode (PostgreSQL shared by several daemons): the answer's bytes live in the result
    // row, so any daemon serves a result without the writer's disk. SQLite gets the same column
    // and table (one schema); the column stays empty: its answer is the file beside it.
    // cluster_id names the database's cluster: the daemons sharing it share one set of queues
    // (their Redis key prefix), whatever URL each uses to reach it, and clusters on one Redis
    // never take each other's jobs.
    sqlite: `
      ALTER TABLE results ADD COLUMN answer_data BLOB;
      CREATE TABLE cluster_settings (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
      INSERT INTO cluster_settings (key, value) VALUES ('cluster_id', lower(hex(randomblob(8))));
    `,
    postgres: `
      ALTER TABLE results ADD COLUMN answer_data BYTEA;
      CREATE TABLE cluster_settings (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
      INSERT INTO cluster_settings (key, value) VALUES ('cluster_id', substr(md5(random()::text || clock_timestamp()::text), 1, 16));
    `,
  },
  {
    version: 7,
    name: 'repo_bundles',
    // Cluster mode: the repository a task reads, packed at submission into a deterministic tar
    // stored once by its sha256 (the content address); the task names it. SQLite gets the same
    // table and column (one schema); outside cluster mode they stay empty (NULL).
    sqlite: `
      CREATE TABLE repo_bundles (
        digest TEXT PRIMARY KEY NOT NULL CHECK (length(digest) = 64),
        data BLOB NOT NULL,
        bytes INTEGER NOT NULL CHECK (bytes >= 0),
        created_at TEXT NOT NULL
      );
      ALTER TABLE tasks ADD COLUMN bundle_digest TEXT CHECK (bundle_digest IS NULL OR length(bundle_digest) = 64);
    `,
    postgres: `
      CREATE TABLE repo_bundles (
        digest TEXT PRIMARY KEY NOT NULL CHECK (length(digest) = 64),
        data BYTEA NOT NULL,
        bytes BIGINT NOT NULL CHECK (bytes >= 0),
        created_at TEXT NOT NULL
      );
      ALTER TABLE tasks ADD COLUMN bundle_digest TEXT CHECK (bundle_digest IS NULL OR length(bundle_digest) = 64);
    `,
  },
  {
    version: 8,
    name: 'caller_groups',
    // Single-host repository snapshots are packed as the caller when the run starts, which may
    // be after a restart: the caller's gid and supplementary groups as the kernel reported them
    // at submission (SO_PEERCRED, SO_PEERGROUPS; groups NULL when it could not say) are kept
    // with the task, so the packer runs with exactly the caller's rights whenever it runs.
    // bundle_digest is also set when a single-host run starts (its snapshot), and the retention
    // prune of repo_bundles / cached trees looks up the digests live tasks name.
    sqlite: `
      ALTER TABLE tasks ADD COLUMN caller_gid INTEGER CHECK (caller_gid IS NULL OR caller_gid >= 0);
      ALTER TABLE tasks ADD COLUMN caller_groups TEXT;
      CREATE INDEX tasks_bundle_digest ON tasks(bundle_digest) WHERE bundle_digest IS NOT NULL;
    `,
    postgres: `
      ALTER TABLE tasks ADD COLUMN caller_gid BIGINT CHECK (caller_gid IS NULL OR caller_gid >= 0);
      ALTER TABLE tasks ADD COLUMN caller_groups TEXT;
      CREATE INDEX tasks_bundle_digest ON tasks(bundle_digest) WHERE bundle_digest IS NOT NULL;
    `,
  },
];

/**
 * The database's cluster id (migration 6): names the queues of the daemons sharing it (their
 * Redis key prefix), for the task store and the research store alike.
 */
export async function readClusterId(db: SqlExecutor): Promise<string> {
  const row = await db.get<{ value: string }>("SELECT value FROM cluster_settings WHERE key = 'cluster_id'");
  if (row === undefined) throw new FusionError('store_error', 'the database has no cluster id', { retryable: false });
  return row.value;
}

export const LATEST_SCHEMA_VERSION: number = MIGRATIONS.reduce((max, m) => Math.max(max, m.version), 0);

const CREATE_MIGRATIONS_TABLE = `
  CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
  )`;

const SELECT_VERSION = 'SELECT COALESCE(MAX(version), 0) AS version FROM schema_migrations';

/** The list must be 1, 2, 3, … with no gap: a gap would mean a lost migration. */
function assertWellFormed(migrations: readonly Migration[]): void {
  migrations.forEach((m, index) => {
    if (m.version !== index + 1) {
      throw new FusionError('internal_error', `migration list is not numbered 1..n (found ${m.version} at position ${index + 1})`);
    }
  });
}

export interface MigrationOutcome {
  from: number;
  to: number;
  applied: number[];
}

/** Applies the pending migrations in order; a no-op on an up-to-date database. */
export async function migrate(db: SqlDb, log: Logger, migrations: readonly Migration[] = MIGRATIONS): Promise<MigrationOutcome> {
  assertWellFormed(migrations);
  const latest = migrations.length;
  // Under the migration lock: two PostgreSQL daemons creating the table at once would collide.
  await db.migrationTransaction((tx) => tx.exec(CREATE_MIGRATIONS_TABLE));
  const from = (await db.get<{ version: number }>(SELECT_VERSION))?.version ?? 0;
  refuseNewer(from, latest);

  const applied: number[] = [];
  for (const migration of migrations) {
    if (migration.version <= from) continue;
    const ran = await db.migrationTransaction(async (tx) => {
      // Re-read under the write lock: another process may have migrated meanwhile.
      const current = (await tx.get<{ version: number }>(SELECT_VERSION))?.version ?? 0;
      refuseNewer(current, latest);
      if (current >= migration.version) return false;
      await tx.exec(migrationSql(migration, db.engine));
      await tx.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', [
        migration.version, migration.name, new Date().toISOString(),
      ]);
      return true;
    });
    if (ran) {
      applied.push(migration.version);
      log.info({ version: migration.version, migration: migration.name }, 'store migration applied');
    }
  }
  return { from, to: Math.max(from, latest), applied };
}

/** The migration's text for `engine`. */
export function migrationSql(migration: Migration, engine: SqlEngine): string {
  return engine === 'sqlite' ? migration.sqlite : migration.postgres;
}

function refuseNewer(version: number, latest: number): void {
  if (version > latest) {
    throw new FusionError(
      'store_error',
      `store schema version ${version} is newer than this fusion build knows (${latest}); upgrade fusion or use another store file`,
      { retryable: false, details: { schemaVersion: version, supportedVersion: latest } },
    );
  }
}
