/**
 * The SQL adapter of the `Store` port, one implementation for both engines: SQLite (the
 * embedded default; one connection, one FIFO queue, see sqlite-db.ts) and PostgreSQL (cluster
 * mode, see pg-db.ts and pg-store.ts). Every method that writes several rows does so in one
 * transaction, and every state change is a compare-and-set on `tasks.state` with its event(s)
 * in the same transaction, so a crash leaves either the whole change or none of it.
 */
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import { FusionError } from '../errors.js';
import { untrusted, type Logger } from '../log.js';
import { assertTransition, isTerminal, statusOf, TERMINAL_STATES, type TaskState } from '../contracts/task-state.js';
import type {
  AttemptOutcome, AttemptRecord, ListTasksQuery, NewTask, RepoBundleRecord, ResultRecord, Store, TaskError, TaskEvent, TaskEventKind, TaskRecord,
  TaskTarballRecord, TransitionPatch,
} from './port.js';
import { migrate, readClusterId } from './migrations.js';
import { SqliteDb, sqliteCodeOf, type SqlExecutor, type SqlParam } from './sqlite-db.js';
import { constraintOf, type SqlDb } from './sql-port.js';
import { TaskCreateBatcher } from './task-create-batch.js';
import {
  TASK_COLUMNS, toAttemptRecord, toResultRecord, toTaskEvent, toTaskRecord,
  type AttemptRow, type EventRow, type ResultRow, type TaskRow,
} from './rows.js';

export interface SqliteStoreOptions {
  /** Path of the database file; created with mode 0600 when absent. */
  file: string;
  log: Logger;
}

/** The connection settings as SQLite reports them (for diagnostics and tests). */
export interface StorePragmas {
  journalMode: string;
  /** 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA. */
  synchronous: number;
  foreignKeys: boolean;
  busyTimeoutMs: number;
  schemaVersion: number;
}

/** The store as built here, plus its file path and live connection settings. */
export type SqliteStore = Store & { readonly file: string; pragmas(): Promise<StorePragmas>; databaseFacts(): Promise<Record<string, unknown>> };

/**
 * PRAGMAs of every connection. WAL + synchronous=FULL: a committed transaction survives power loss.
 * The busy timeout comes first: switching to WAL, and the first read of a file another process is
 * checkpointing or recovering, may meet a lock, and without a busy handler SQLite answers
 * SQLITE_BUSY at once instead of waiting.
 */
const BUSY_TIMEOUT = 'PRAGMA busy_timeout = 5000';
const PRAGMAS = ['PRAGMA synchronous = FULL', 'PRAGMA foreign_keys = ON'];

const now = (): string => new Date().toISOString();

/**
 * Opens a connection with WAL and the PRAGMAs above. Every connection to a store file (the task
 * store's, the research store's) is made here, so they all share the same durability settings.
 */
export async function openConfiguredDb(file: string, log: Logger): Promise<SqliteDb> {
  const db = await SqliteDb.open(file, log);
  try {
    await db.exec(BUSY_TIMEOUT);
    const mode = await switchToWal(db);
    if (mode?.journal_mode.toLowerCase() !== 'wal') {
      throw new FusionError('store_error', `store could not enable WAL journaling (got ${mode?.journal_mode ?? 'nothing'})`, {
        retryable: false, details: { file },
      });
    }
    for (const pragma of PRAGMAS) await db.exec(pragma);
    return db;
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  }
}

/** How long opens that meet each other switching a new file to WAL keep trying (the busy timeout). */
const WAL_SWITCH_MS = 5_000;

/**
 * `PRAGMA journal_mode = WAL`, tried again while it answers SQLITE_BUSY. Connections opening a
 * new file together each hold a shared lock and want the exclusive one to switch: SQLite answers
 * one of them BUSY at once, without its busy handler (waiting could only deadlock), so the busy
 * timeout does not cover this case. A short random pause lets the other one finish.
 */
async function switchToWal(db: SqliteDb): Promise<{ journal_mode: string } | undefined> {
  const deadline = Date.now() + WAL_SWITCH_MS;
  for (;;) {
    try {
      return await db.get<{ journal_mode: string }>('PRAGMA journal_mode = WAL');
    } catch (err) {
      if (sqliteCodeOf(err) !== 'SQLITE_BUSY' || Date.now() >= deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 10 + Math.floor(Math.random() * 40)));
    }
  }
}

/** Opens the file, sets the PRAGMAs and runs the migrations; the store is ready to use. */
export async function openSqliteStore(options: SqliteStoreOptions): Promise<SqliteStore> {
  const log = options.log.child({ component: 'store' });
  const db = await openConfiguredDb(options.file, log);
  try {
    const store = new SqlStoreImpl(db, log, options.file);
    await store.init();
    return store;
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  }
}

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

/**
 * The `data` column holds the task tarball gzip-compressed (a sealed tarball is mostly JSON and
 * tar padding: ~105 KB → ~12 KB for a builtin task). The port still sees the exact tar bytes its
 * digests are over. Rows sealed before compression hold the plain tar, told apart by the gzip
 * magic (a tar starts with a member name, never 0x1f 0x8b).
 */
async function unpackTarballColumn(data: Buffer): Promise<Buffer> {
  if (data.length < 2 || data[0] !== 0x1f || data[1] !== 0x8b) return data;
  // A damaged blob is returned as stored: the caller's digest check then names it (artifact_error).
  return gunzipAsync(data).catch(() => data);
}

function isConstraint(err: unknown, kind: 'UNIQUE' | 'FOREIGN KEY'): boolean {
  return constraintOf(err) === (kind === 'UNIQUE' ? 'unique' : 'foreign_key');
}

function serialise(data: Record<string, unknown>): string {
  try {
    return JSON.stringify(data);
  } catch (err) {
    throw new FusionError('invalid_input', 'event data is not JSON-serialisable', { cause: err });
  }
}

function noTask(taskId: string): FusionError {
  return new FusionError('not_found', `no task ${taskId}`, { details: { taskId } });
}

/** The docs/behaviour.md#f2 summary line: short, and the error message is cut because it may be untrusted text. */
function terminalSummary(task: TaskRecord, error: TaskError | null): string {
  const base = `fusion ${task.workflow} ${task.state}`;
  return error === null ? base : `${base}: ${error.code}: ${untrusted(error.message, 200)}`;
}

/** The store over either engine; `file` is the SQLite path or the redacted PostgreSQL URL. */
export class SqlStoreImpl implements SqliteStore {
  private readonly creates: TaskCreateBatcher;

  constructor(readonly db: SqlDb, private readonly log: Logger, readonly file: string) {
    this.creates = new TaskCreateBatcher(db, now);
  }

  async init(): Promise<void> {
    const outcome = await migrate(this.db, this.log);
    this.log.debug({ file: this.file, schemaVersion: outcome.to, applied: outcome.applied }, 'store ready');
  }

  close(): Promise<void> {
    return this.db.close();
  }

  /** The database's cluster id (migration 6): names the queues the daemons sharing it share. */
  clusterId(): Promise<string> {
    return readClusterId(this.db);
  }

  /** What /v1/health reports of the database (never a password: `file` of PostgreSQL is redacted). */
  async databaseFacts(): Promise<Record<string, unknown>> {
    if (this.db.engine === 'postgres') {
      const row = await this.db.get<{ version: number }>('SELECT COALESCE(MAX(version), 0) AS version FROM schema_migrations');
      return { engine: 'postgres', url: this.file, schemaVersion: row?.version ?? 0 };
    }
    const p = await this.pragmas();
    return { file: this.file, journalMode: p.journalMode, schemaVersion: p.schemaVersion };
  }

  async pragmas(): Promise<StorePragmas> {
    const one = async <T>(sql: string, column: string): Promise<T> => {
      const row = await this.db.get<Record<string, T>>(sql);
      const value = row?.[column];
      if (value === undefined) throw new FusionError('store_error', `no answer to ${sql}`);
      return value;
    };
    return {
      journalMode: await one<string>('PRAGMA journal_mode', 'journal_mode'),
      synchronous: await one<number>('PRAGMA synchronous', 'synchronous'),
      foreignKeys: (await one<number>('PRAGMA foreign_keys', 'foreign_keys')) === 1,
      busyTimeoutMs: await one<number>('PRAGMA busy_timeout', 'timeout'),
      schemaVersion: await one<number>('SELECT COALESCE(MAX(version), 0) AS version FROM schema_migrations', 'version'),
    };
  }

  async createTask(task: NewTask): Promise<TaskRecord> {
    try {
      // Batched and group-committed (task-create-batch.ts); the receipt still waits for its own
      // row to be durable.
      const record = await this.creates.create(task);
      this.log.debug({ taskId: task.id, from: null, to: record.state }, 'store transition committed');
      return record;
    } catch (err) {
      if (isConstraint(err, 'UNIQUE')) {
        throw new FusionError('conflict', `task ${task.id} already exists`, { cause: err, details: { taskId: task.id } });
      }
      throw err;
    }
  }

  getTask(id: string): Promise<TaskRecord | null> {
    return selectTask(this.db, id);
  }

  async getRepoBundle(digest: string): Promise<RepoBundleRecord | null> {
    const row = await this.db.get<{ digest: string; data: Buffer; bytes: number | string; created_at: string }>(
      'SELECT digest, data, bytes, created_at FROM repo_bundles WHERE digest = ?', [digest]);
    return row === undefined ? null : { digest: row.digest, data: row.data, bytes: Number(row.bytes), createdAt: row.created_at };
  }

  async listLiveBundleDigests(): Promise<Set<string>> {
    const terminal = [...TERMINAL_STATES];
    const rows = await this.db.all<{ bundle_digest: string }>(
      `SELECT DISTINCT bundle_digest FROM tasks WHERE bundle_digest IS NOT NULL AND state NOT IN (${terminal.map(() => '?').join(', ')})`, terminal,
    );
    return new Set(rows.map((r) => r.bundle_digest));
  }

  async pruneRepoBundles(beforeIso: string): Promise<number> {
    const terminal = [...TERMINAL_STATES];
    const { changes } = await this.db.run(
      `DELETE FROM repo_bundles WHERE created_at < ? AND NOT EXISTS (
         SELECT 1 FROM tasks WHERE tasks.bundle_digest = repo_bundles.digest AND tasks.state NOT IN (${terminal.map(() => '?').join(', ')}))`,
      [beforeIso, ...terminal],
    );
    return changes;
  }

  async listTasks(query: ListTasksQuery = {}): Promise<TaskRecord[]> {
    const where: string[] = [];
    const params: SqlParam[] = [];
    if (query.state !== undefined) {
      where.push('state = ?');
      params.push(query.state);
    }
    if (query.callerUid !== undefined) {
      where.push('caller_uid = ?');
      params.push(query.callerUid);
    }
    let limit = '';
    if (query.limit !== undefined) {
      if (!Number.isSafeInteger(query.limit) || query.limit < 1) {
        throw new FusionError('invalid_input', 'limit must be a positive integer', { details: { limit: query.limit } });
      }
      limit = ' LIMIT ?';
      params.push(query.limit);
    }
    const sql = `SELECT ${TASK_COLUMNS} FROM tasks${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''}` +
      ` ORDER BY created_at DESC, rowid DESC${limit}`;
    return (await this.db.all<TaskRow>(sql, params)).map(toTaskRecord);
  }

  async listNonTerminalTasks(): Promise<TaskRecord[]> {
    const terminal = [...TERMINAL_STATES];
    const rows = await this.db.all<TaskRow>(
      `SELECT ${TASK_COLUMNS} FROM tasks WHERE state NOT IN (${terminal.map(() => '?').join(', ')}) ORDER BY created_at, rowid`,
      terminal,
    );
    return rows.map(toTaskRecord);
  }

  async transitionTask(id: string, from: TaskState, to: TaskState, patch: TransitionPatch = {}): Promise<TaskRecord | null> {
    assertTransition(from, to);
    // Group commit: concurrent submits and their queued marks share one fsync (sqlite-db.ts).
    const record = await this.db.groupTransaction((tx) => applyTransition(tx, id, from, to, patch, now()));
    this.logTransition(id, from, to, record, patch.error);
    return record;
  }

  async appendEvent(taskId: string, kind: TaskEventKind, data: Record<string, unknown>): Promise<TaskEvent> {
    const at = now();
    const text = serialise(data);
    try {
      const row = await this.db.get<{ seq: number }>(
        'INSERT INTO task_events (task_id, at, kind, data) VALUES (?, ?, ?, ?) RETURNING seq', [taskId, at, kind, text],
      );
      if (row === undefined) throw new FusionError('store_error', 'event insert returned no sequence number');
      return { seq: row.seq, taskId, at, kind, data: JSON.parse(text) as Record<string, unknown> };
    } catch (err) {
      if (isConstraint(err, 'FOREIGN KEY')) throw noTask(taskId);
      throw err;
    }
  }

  async listEvents(taskId: string, afterSeq = 0): Promise<TaskEvent[]> {
    const rows = await this.db.all<EventRow>(
      'SELECT seq, task_id, at, kind, data FROM task_events WHERE task_id = ? AND seq > ? ORDER BY seq',
      [taskId, afterSeq],
    );
    return rows.map(toTaskEvent);
  }

  async incrementResumeCount(id: string): Promise<number> {
    const row = await this.db.get<{ resume_count: number }>(
      'UPDATE tasks SET resume_count = resume_count + 1, updated_at = ? WHERE id = ? RETURNING resume_count', [now(), id],
    );
    if (row === undefined) throw noTask(id);
    return row.resume_count;
  }

  async saveUsage(id: string, usage: string): Promise<void> {
    const { changes } = await this.db.run('UPDATE tasks SET usage = ?, updated_at = ? WHERE id = ?', [usage, now(), id]);
    if (changes === 0) throw noTask(id);
  }

  async claimUsageDelivery(id: string): Promise<boolean> {
    const { changes } = await this.db.run('UPDATE tasks SET usage_delivered = 1 WHERE id = ? AND usage_delivered = 0', [id]);
    return changes === 1;
  }

  async dropSealedCheckpoints(taskId: string): Promise<number> {
    const { changes } = await this.db.run(
      'DELETE FROM checkpoints WHERE task_id = ? AND EXISTS (SELECT 1 FROM task_tarballs WHERE task_id = ?)',
      [taskId, taskId],
    );
    return changes;
  }

  async saveCheckpoint(taskId: string, key: string, value: string): Promise<void> {
    try {
      await upsertCheckpoint(this.db, taskId, key, value);
    } catch (err) {
      if (isConstraint(err, 'FOREIGN KEY')) throw noTask(taskId);
      throw err;
    }
  }

  async getCheckpoint(taskId: string, key: string): Promise<string | null> {
    const row = await this.db.get<{ value: string }>('SELECT value FROM checkpoints WHERE task_id = ? AND key = ?', [taskId, key]);
    return row?.value ?? null;
  }

  async startAttempt(taskId: string, stage: string): Promise<AttemptRecord> {
    try {
      return await this.db.transaction(async (tx) => {
        // Locks the task's row first (a no-op write): PostgreSQL daemons starting attempts of one
        // task at once then number them one after the other, as SQLite's single writer does.
        const { changes } = await tx.run('UPDATE tasks SET resume_count = resume_count WHERE id = ?', [taskId]);
        if (changes === 0) throw noTask(taskId);
        const row = await tx.get<{ next: number }>(
          'SELECT COALESCE(MAX(attempt), 0) + 1 AS next FROM attempts WHERE task_id = ? AND stage = ?',
          [taskId, stage],
        );
        const attempt = row?.next ?? 1;
        const startedAt = now();
        await tx.run(
          "INSERT INTO attempts (task_id, stage, attempt, status, started_at) VALUES (?, ?, ?, 'running', ?)",
          [taskId, stage, attempt, startedAt],
        );
        return {
          taskId, stage, attempt, status: 'running' as const, startedAt, endedAt: null, detail: null, tarballPath: null,
          tarballSha256: null,
        };
      });
    } catch (err) {
      if (isConstraint(err, 'FOREIGN KEY')) throw noTask(taskId);
      throw err;
    }
  }

  async finishAttempt(taskId: string, stage: string, attempt: number, outcome: AttemptOutcome): Promise<void> {
    await this.db.transaction(async (tx) => {
      const at = now();
      const { changes } = await tx.run(
        `UPDATE attempts SET status = ?, ended_at = ?, detail = ?, tarball_path = ?, tarball_sha256 = ?
           WHERE task_id = ? AND stage = ? AND attempt = ? AND status = 'running'`,
        [outcome.status, at, outcome.detail ?? null, outcome.tarballPath ?? null, outcome.tarballSha256 ?? null,
          taskId, stage, attempt],
      );
      if (changes === 1) {
        // The stage's checkpoint and the usage it paid for commit with its outcome, or not at all.
        for (const ck of outcome.checkpoints ?? []) await upsertCheckpoint(tx, taskId, ck.key, ck.value);
        if (outcome.usage !== undefined) await tx.run('UPDATE tasks SET usage = ?, updated_at = ? WHERE id = ?', [outcome.usage, at, taskId]);
        return;
      }
      const details = { taskId, stage, attempt };
      const existing = await tx.get<{ status: string }>(
        'SELECT status FROM attempts WHERE task_id = ? AND stage = ? AND attempt = ?',
        [taskId, stage, attempt],
      );
      if (existing === undefined) throw new FusionError('not_found', `no attempt ${stage}#${attempt} of task ${taskId}`, { details });
      throw new FusionError('conflict', `attempt ${stage}#${attempt} of task ${taskId} already ${existing.status}`, { details });
    });
  }

  async closeRunningAttempts(taskId: string, detail: string): Promise<number> {
    const { changes } = await this.db.run(
      "UPDATE attempts SET status = 'failed', ended_at = ?, detail = ? WHERE task_id = ? AND status = 'running'",
      [now(), detail, taskId],
    );
    return changes;
  }

  async listAttempts(taskId: string): Promise<AttemptRecord[]> {
    const rows = await this.db.all<AttemptRow>(
      `SELECT task_id, stage, attempt, status, started_at, ended_at, detail, tarball_path, tarball_sha256
         FROM attempts WHERE task_id = ? ORDER BY rowid`,
      [taskId],
    );
    return rows.map(toAttemptRecord);
  }

  async commitResult(result: ResultRecord, patch: TransitionPatch = {}): Promise<TaskRecord | null> {
    const taskId = result.taskId;
    const record = await this.db.transaction(async (tx) => {
      const moved = await applyTransition(tx, taskId, 'merging', 'completed', patch, now());
      // Not merging: nothing was written (the CAS matched no row), so the commit is empty.
      if (moved === null) return null;
      try {
        await tx.run(
          `INSERT INTO results (task_id, answer_path, answer_sha256, answer_bytes, metadata, metadata_sha256, committed_at, answer_data)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          [taskId, result.answerPath, result.answerSha256, result.answerBytes, result.metadata, result.metadataSha256,
            result.committedAt, this.db.engine === 'postgres' ? (result.answerData ?? null) : null],
        );
      } catch (err) {
        // Throwing rolls back the state change and both events with it.
        if (isConstraint(err, 'UNIQUE')) throw new FusionError('conflict', `task ${taskId} already has a result`, { cause: err });
        throw err;
      }
      return moved;
    });
    this.logTransition(taskId, 'merging', 'completed', record, patch.error);
    return record;
  }

  async getResult(taskId: string): Promise<ResultRecord | null> {
    const row = await this.db.get<ResultRow>(
      `SELECT task_id, answer_path, answer_sha256, answer_bytes, metadata, metadata_sha256, committed_at, answer_data
         FROM results WHERE task_id = ?`,
      [taskId],
    );
    return row === undefined ? null : toResultRecord(row);
  }

  async saveTaskTarball(record: TaskTarballRecord): Promise<boolean> {
    // Stored compressed; the `bytes` column is the stored blob's length (its CHECK), the port's
    // `bytes` the tar's (restored on read from the unpacked data, which the sha256 covers).
    const stored = await gzipAsync(record.data, { level: 9 });
    try {
      const { changes } = await this.db.run(
        `INSERT INTO task_tarballs (task_id, sha256, bytes, manifest_sha256, signature, public_key_sha256, created_at, data)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (task_id) DO NOTHING`,
        [record.taskId, record.sha256, stored.length, record.manifestSha256, record.signature, record.publicKeySha256,
          record.createdAt, stored],
      );
      return changes === 1;
    } catch (err) {
      if (isConstraint(err, 'FOREIGN KEY')) throw noTask(record.taskId);
      throw err;
    }
  }

  async getTaskTarball(taskId: string): Promise<TaskTarballRecord | null> {
    const row = await this.db.get<{
      task_id: string; sha256: string; bytes: number; manifest_sha256: string; signature: string | null;
      public_key_sha256: string | null; created_at: string; data: Buffer;
    }>(
      `SELECT task_id, sha256, bytes, manifest_sha256, signature, public_key_sha256, created_at, data
         FROM task_tarballs WHERE task_id = ?`,
      [taskId],
    );
    if (row === undefined) return null;
    const data = await unpackTarballColumn(row.data);
    return {
      taskId: row.task_id, sha256: row.sha256, bytes: data.length, manifestSha256: row.manifest_sha256,
      signature: row.signature, publicKeySha256: row.public_key_sha256, createdAt: row.created_at, data,
    };
  }

  async listUnsignedTaskTarballs(): Promise<Array<{ taskId: string; sha256: string }>> {
    const rows = await this.db.all<{ task_id: string; sha256: string }>('SELECT task_id, sha256 FROM task_tarballs WHERE signature IS NULL ORDER BY task_id');
    return rows.map((r) => ({ taskId: r.task_id, sha256: r.sha256 }));
  }

  async listTerminalTasksBefore(beforeIso: string, limit: number): Promise<TaskRecord[]> {
    const terminal = [...TERMINAL_STATES];
    const rows = await this.db.all<TaskRow>(
      `SELECT ${TASK_COLUMNS} FROM tasks WHERE state IN (${terminal.map(() => '?').join(', ')}) AND updated_at < ?
         ORDER BY updated_at, rowid LIMIT ?`,
      [...terminal, beforeIso, limit],
    );
    return rows.map(toTaskRecord);
  }

  async listUnsealedTerminalTasks(limit: number): Promise<TaskRecord[]> {
    const terminal = [...TERMINAL_STATES];
    const rows = await this.db.all<TaskRow>(
      `SELECT ${TASK_COLUMNS} FROM tasks WHERE state IN (${terminal.map(() => '?').join(', ')})
         AND NOT EXISTS (SELECT 1 FROM task_tarballs t WHERE t.task_id = tasks.id)
         ORDER BY updated_at, rowid LIMIT ?`,
      [...terminal, limit],
    );
    return rows.map(toTaskRecord);
  }

  async deleteTerminalTask(taskId: string): Promise<boolean> {
    const terminal = [...TERMINAL_STATES];
    // ON DELETE CASCADE removes its events, checkpoints, attempts, result and tarball with it.
    const { changes } = await this.db.run(
      `DELETE FROM tasks WHERE id = ? AND state IN (${terminal.map(() => '?').join(', ')})`,
      [taskId, ...terminal],
    );
    return changes === 1;
  }

  async countTasksByState(): Promise<Record<string, number>> {
    const rows = await this.db.all<{ state: string; n: number }>('SELECT state, COUNT(*) AS n FROM tasks GROUP BY state');
    return Object.fromEntries(rows.map((r) => [r.state, r.n]));
  }

  backupTo(file: string): Promise<void> {
    if (this.db instanceof SqliteDb) return this.db.backupTo(file);
    // A PostgreSQL store is backed up by PostgreSQL's own tools (docs/operations.md#cluster-mode).
    return Promise.reject(new FusionError('store_error', 'online backup to a file is for SQLite stores; back PostgreSQL up with pg_dump', { retryable: false }));
  }

  /**
   * Debug only: the tasks layer writes the one info line per state transition (docs/architecture.md#logging);
   * this one is for tracing the store itself, including CAS misses.
   */
  private logTransition(taskId: string, from: TaskState, to: TaskState, record: TaskRecord | null, error?: TaskError): void {
    if (record === null) {
      this.log.debug({ taskId, from, to }, 'store transition skipped: state moved on');
      return;
    }
    this.log.debug({ taskId, from, to, ...(error ? { errorCode: error.code } : {}) }, 'store transition committed');
  }
}

async function selectTask(db: SqlExecutor, id: string): Promise<TaskRecord | null> {
  const row = await db.get<TaskRow>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = ?`, [id]);
  return row === undefined ? null : toTaskRecord(row);
}

async function upsertCheckpoint(db: SqlExecutor, taskId: string, key: string, value: string): Promise<void> {
  await db.run(
    'INSERT INTO checkpoints (task_id, key, value) VALUES (?, ?, ?) ON CONFLICT (task_id, key) DO UPDATE SET value = excluded.value',
    [taskId, key, value],
  );
}

async function insertEvent(tx: SqlExecutor, taskId: string, kind: TaskEventKind, data: Record<string, unknown>, at: string): Promise<void> {
  await tx.run('INSERT INTO task_events (task_id, at, kind, data) VALUES (?, ?, ?, ?)', [taskId, at, kind, serialise(data)]);
}

/**
 * CAS `from → to` with its transition event and, for a terminal `to`, the docs/behaviour.md#f2 terminal
 * notification. Runs inside the caller's transaction; null when the task was not in `from`.
 */
async function applyTransition(
  tx: SqlExecutor, id: string, from: TaskState, to: TaskState, patch: TransitionPatch, at: string,
): Promise<TaskRecord | null> {
  const sets = ['state = ?', 'updated_at = ?'];
  const params: SqlParam[] = [to, at];
  if (patch.error !== undefined) {
    sets.push('error_code = ?', 'error_message = ?', 'error_state = ?');
    params.push(patch.error.code, patch.error.message, patch.error.state);
  }
  if (patch.usage !== undefined) {
    sets.push('usage = ?');
    params.push(patch.usage);
  }
  if (patch.bundleDigest !== undefined) {
    // The first snapshot a task ran over stays its snapshot: a resumed run never replaces it.
    sets.push('bundle_digest = COALESCE(bundle_digest, ?)');
    params.push(patch.bundleDigest);
  }
  const { changes } = await tx.run(`UPDATE tasks SET ${sets.join(', ')} WHERE id = ? AND state = ?`, [...params, id, from]);
  if (changes === 0) return null;
  const task = await selectTask(tx, id);
  if (task === null) throw new FusionError('store_error', `task ${id} vanished during a transition`);

  // eventData may add fields but never rewrite from/to/error, which are the store's facts.
  const { from: _from, to: _to, error: _error, ...extra } = patch.eventData ?? {};
  const transition: Record<string, unknown> = { from, to, ...extra };
  if (patch.error !== undefined) transition.error = patch.error;
  await insertEvent(tx, id, 'transition', transition, at);

  if (isTerminal(to)) {
    const error = to === 'completed' ? null : task.error;
    await insertEvent(tx, id, 'terminal', {
      taskId: id,
      name: task.workflow,
      status: statusOf(to),
      error,
      summary: terminalSummary(task, error),
    }, at);
  }
  return task;
}
