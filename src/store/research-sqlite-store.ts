/**
 * SQL adapter of the research stores (runs, snapshots, documents, API keys), one implementation
 * for SQLite and PostgreSQL (pg-store.ts opens the latter). For SQLite it opens its own
 * connection to the store file (WAL, synchronous=FULL like the task store's), so several
 * daemons can share one research database. Every status change is a compare-and-set on the
 * status: a single UPDATE … WHERE status … RETURNING (atomic, and one durable commit on the
 * create path), or BEGIN IMMEDIATE when several rows change together (completion), which holds
 * the file's write lock across processes.
 */
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ResearchRunStatus } from '../contracts/research.js';
import { assertRunTransition, CANCELABLE } from '../contracts/research-run-state.js';
import { migrate, readClusterId } from './migrations.js';
import type { SqlDb, SqlExecutor } from './sql-port.js';
import { openConfiguredDb } from './sqlite-store.js';
import { SqliteDb } from './sqlite-db.js';
import type {
  ApiKeyRecord, ApiKeyStore, NewResearchRun, ResearchDocumentRecord, ResearchRunRecord, ResearchRunStore,
  ResearchSnapshotRecord, RunCompletion,
} from './research-port.js';
import {
  RUN_COLUMNS, toDocumentRecord, toKeyRecord, toRunRecord, toSnapshotRecord,
  type ApiKeyRow, type ResearchDocumentRow, type ResearchRunRow, type ResearchSnapshotRow,
} from './research-rows.js';

export type ResearchSqliteStore = ResearchRunStore & ApiKeyStore & {
  readonly file: string;
  /** Online SQLite backup into `file` (the backup job, when the research database is its own file); absent on PostgreSQL. */
  backupTo?(file: string): Promise<void>;
  /** The research database's cluster id: the Redis key prefix of its research queue. */
  clusterId(): Promise<string>;
};

const now = (): string => new Date().toISOString();

export async function openResearchSqliteStore(options: { file: string; log: Logger }): Promise<ResearchSqliteStore> {
  const log = options.log.child({ component: 'research-store' });
  const db = await openConfiguredDb(options.file, log);
  try {
    await migrate(db, log);
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  }
  return new ResearchSqlStoreImpl(db, options.file);
}

async function selectRun(db: SqlExecutor, id: string): Promise<ResearchRunRecord | null> {
  const row = await db.get<ResearchRunRow>(`SELECT ${RUN_COLUMNS} FROM research_runs WHERE id = ?`, [id]);
  return row === undefined ? null : toRunRecord(row);
}

/** The research stores over either engine (PostgreSQL in cluster mode: pg-store.ts). */
export class ResearchSqlStoreImpl implements ResearchSqliteStore {
  constructor(private readonly db: SqlDb, readonly file: string) {}

  close(): Promise<void> {
    return this.db.close();
  }

  backupTo(file: string): Promise<void> {
    if (this.db instanceof SqliteDb) return this.db.backupTo(file);
    return Promise.reject(new FusionError('store_error', 'online backup to a file is for SQLite stores; back PostgreSQL up with pg_dump', { retryable: false }));
  }

  clusterId(): Promise<string> {
    return readClusterId(this.db);
  }

  async createRun(run: NewResearchRun, claimAs?: string, failWith?: string): Promise<{ run: ResearchRunRecord; created: boolean }> {
    // One statement, so one durable commit: the unique (workspace, key) index decides the race
    // (across processes too); the loser reads the winner's row. A run created claimed is the
    // queued → running step taken at once, inside the same atomic insert; one created failed
    // takes running → failed in it as well.
    if (claimAs !== undefined) assertRunTransition('queued', 'running');
    const failed = claimAs !== undefined && failWith !== undefined;
    if (failed) assertRunTransition('running', 'failed');
    const at = now();
    const rows = await this.db.all<ResearchRunRow>(
      `INSERT INTO research_runs (id, workspace_id, idempotency_key, payload_sha256, query, source_urls, limits, status,
         user_agent, started_at, claims, error, finished_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT DO NOTHING RETURNING ${RUN_COLUMNS}`,
      [run.id, run.workspaceId, run.idempotencyKey, run.payloadSha256, run.query, JSON.stringify(run.sourceUrls),
        JSON.stringify(run.limits), failed ? 'failed' : claimAs === undefined ? 'queued' : 'running', claimAs ?? null,
        claimAs === undefined ? null : at, claimAs === undefined ? 0 : 1, failed ? failWith : null, failed ? at : null, at, at],
    );
    if (rows[0] !== undefined) return { run: toRunRecord(rows[0]), created: true };
    const existing = await this.db.get<ResearchRunRow>(
      `SELECT ${RUN_COLUMNS} FROM research_runs WHERE workspace_id = ? AND idempotency_key = ?`,
      [run.workspaceId, run.idempotencyKey],
    );
    if (existing === undefined) {
      // Only the primary key can conflict without the (workspace, key) pair: a digest collision.
      throw new FusionError('store_error', `research run id ${run.id} is taken by another workspace and key`, { retryable: false });
    }
    return { run: toRunRecord(existing), created: false };
  }

  getRun(id: string): Promise<ResearchRunRecord | null> {
    return selectRun(this.db, id);
  }

  async listRuns(workspaceId: string, limit: number, after?: { createdAt: string; id: string }): Promise<ResearchRunRecord[]> {
    const rows = after === undefined
      ? await this.db.all<ResearchRunRow>(`SELECT ${RUN_COLUMNS} FROM research_runs WHERE workspace_id = ? ORDER BY created_at DESC, id DESC LIMIT ?`, [workspaceId, limit])
      : await this.db.all<ResearchRunRow>(
        `SELECT ${RUN_COLUMNS} FROM research_runs WHERE workspace_id = ? AND (created_at < ? OR (created_at = ? AND id < ?))
           ORDER BY created_at DESC, id DESC LIMIT ?`,
        [workspaceId, after.createdAt, after.createdAt, after.id, limit],
      );
    return rows.map(toRunRecord);
  }

  async claimRun(id: string, userAgent: string, reclaim: boolean): Promise<ResearchRunRecord | null> {
    assertRunTransition('queued', 'running');
    if (reclaim) assertRunTransition('running', 'running');
    const at = now();
    const rows = await this.db.all<ResearchRunRow>(
      `UPDATE research_runs SET status = 'running', user_agent = ?, started_at = COALESCE(started_at, ?), claims = claims + 1,
         updated_at = ? WHERE id = ? AND cancel_requested_at IS NULL AND (status = 'queued' OR (? = 1 AND status = 'running'))
         RETURNING ${RUN_COLUMNS}`,
      [userAgent, at, at, id, reclaim ? 1 : 0],
    );
    return rows[0] === undefined ? null : toRunRecord(rows[0]);
  }

  completeRun(id: string, completion: RunCompletion): Promise<ResearchRunRecord | null> {
    return this.db.transaction(async (tx) => {
      if (!(await this.moveFrom(tx, id, 'running', 'succeeded'))) return null;
      const at = now();
      // A re-claimed run may have partial rows of its first executor: they are replaced.
      await tx.run('DELETE FROM research_snapshots WHERE run_id = ?', [id]);
      await tx.run('DELETE FROM research_documents WHERE run_id = ?', [id]);
      for (const s of completion.snapshots) {
        await tx.run(
          `INSERT INTO research_snapshots (run_id, url, canonical_url, final_url, http_status, content_type, bytes, sha256,
             content, fetched_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
          [id, s.url, s.canonicalUrl, s.finalUrl, s.httpStatus, s.contentType, s.bytes, s.sha256, s.content, s.fetchedAt],
        );
      }
      const d = completion.document;
      await tx.run(
        `INSERT INTO research_documents (id, run_id, workspace_id, name, mime_type, tags, source_uri, indexing_status, status,
           enabled, content, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [d.id, id, d.workspaceId, d.name, d.mimeType, JSON.stringify(d.tags), d.sourceUri, d.indexingStatus, d.status,
          d.enabled ? 1 : 0, d.content, at],
      );
      await tx.run(
        'UPDATE research_runs SET result_document_id = ?, crawl_report = ?, finished_at = ?, updated_at = ? WHERE id = ?',
        [d.id, JSON.stringify(completion.crawlReport), at, at, id],
      );
      return selectRun(tx, id);
    });
  }

  async failRun(id: string, from: 'queued' | 'running', error: string, crawlReport?: RunCompletion['crawlReport']): Promise<ResearchRunRecord | null> {
    assertRunTransition(from, 'failed');
    const at = now();
    const rows = await this.db.all<ResearchRunRow>(
      `UPDATE research_runs SET status = 'failed', error = ?, crawl_report = COALESCE(?, crawl_report), finished_at = ?, updated_at = ?
         WHERE id = ? AND status = ? RETURNING ${RUN_COLUMNS}`,
      [error, crawlReport === undefined ? null : JSON.stringify(crawlReport), at, at, id, from],
    );
    return rows[0] === undefined ? null : toRunRecord(rows[0]);
  }

  async cancelRun(id: string): Promise<{ run: ResearchRunRecord; changed: boolean } | null> {
    for (const from of CANCELABLE) assertRunTransition(from, 'canceled');
    const at = now();
    const rows = await this.db.all<ResearchRunRow>(
      `UPDATE research_runs SET status = 'canceled', cancel_requested_at = ?, finished_at = ?, updated_at = ?
         WHERE id = ? AND status IN (${CANCELABLE.map(() => '?').join(', ')}) RETURNING ${RUN_COLUMNS}`,
      [at, at, at, id, ...CANCELABLE],
    );
    if (rows[0] !== undefined) return { run: toRunRecord(rows[0]), changed: true };
    const run = await this.getRun(id);
    return run === null ? null : { run, changed: false };
  }

  async failUnfinished(error: string): Promise<string[]> {
    for (const from of CANCELABLE) assertRunTransition(from, 'failed');
    const at = now();
    const rows = await this.db.all<{ id: string }>(
      `UPDATE research_runs SET status = 'failed', error = ?, finished_at = ?, updated_at = ?
         WHERE status IN ('queued', 'running') RETURNING id`,
      [error, at, at],
    );
    return rows.map((r) => r.id);
  }

  async listUnfinished(): Promise<Array<{ id: string; status: 'queued' | 'running' }>> {
    return this.db.all<{ id: string; status: 'queued' | 'running' }>(`SELECT id, status FROM research_runs WHERE status IN ('queued', 'running') ORDER BY created_at, id`);
  }

  async getDocument(runId: string): Promise<ResearchDocumentRecord | null> {
    const row = await this.db.get<ResearchDocumentRow>(
      `SELECT id, run_id, workspace_id, name, mime_type, tags, source_uri, indexing_status, status, enabled, content, created_at
         FROM research_documents WHERE run_id = ?`,
      [runId],
    );
    return row === undefined ? null : toDocumentRecord(row);
  }

  async listSnapshots(runId: string): Promise<ResearchSnapshotRecord[]> {
    const rows = await this.db.all<ResearchSnapshotRow>(
      `SELECT url, canonical_url, final_url, http_status, content_type, bytes, sha256, content, fetched_at
         FROM research_snapshots WHERE run_id = ? ORDER BY rowid`,
      [runId],
    );
    return rows.map(toSnapshotRecord);
  }

  async insertKey(key: Omit<ApiKeyRecord, 'createdAt' | 'revokedAt'>): Promise<ApiKeyRecord> {
    const at = now();
    await this.db.run('INSERT INTO api_keys (id, workspace_id, kind, key_sha256, created_at) VALUES (?, ?, ?, ?, ?)', [
      key.id, key.workspaceId, key.kind, key.keySha256, at,
    ]);
    return { ...key, createdAt: at, revokedAt: null };
  }

  async getKey(id: string): Promise<ApiKeyRecord | null> {
    const row = await this.db.get<ApiKeyRow>('SELECT id, workspace_id, kind, key_sha256, created_at, revoked_at FROM api_keys WHERE id = ?', [id]);
    return row === undefined ? null : toKeyRecord(row);
  }

  async listKeys(): Promise<ApiKeyRecord[]> {
    const rows = await this.db.all<ApiKeyRow>('SELECT id, workspace_id, kind, key_sha256, created_at, revoked_at FROM api_keys ORDER BY created_at, rowid');
    return rows.map(toKeyRecord);
  }

  revokeKey(id: string): Promise<ApiKeyRecord | null> {
    return this.db.transaction(async (tx) => {
      await tx.run('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL', [now(), id]);
      const row = await tx.get<ApiKeyRow>('SELECT id, workspace_id, kind, key_sha256, created_at, revoked_at FROM api_keys WHERE id = ?', [id]);
      return row === undefined ? null : toKeyRecord(row);
    });
  }

  /** Compare-and-set of the status; false when the run is not (or no longer) in `from`. */
  private async moveFrom(tx: SqlExecutor, id: string, from: ResearchRunStatus, to: ResearchRunStatus): Promise<boolean> {
    assertRunTransition(from, to);
    const { changes } = await tx.run(`UPDATE research_runs SET status = ?, updated_at = ? WHERE id = ? AND status = ?`, [to, now(), id, from]);
    return changes === 1;
  }
}

/** The error for an unknown key id (`fusion keys revoke`). */
export function keyNotFound(id: string): FusionError {
  return new FusionError('not_found', `no API key ${id}`, { details: { keyId: id } });
}
