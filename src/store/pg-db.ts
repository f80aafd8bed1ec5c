/**
 * The PostgreSQL connection (cluster mode) behind the same `SqlDb` shape as SQLite's: a `pg`
 * pool; statements written once in the store's dialect (`?` placeholders) are turned into
 * PostgreSQL's `$n`; every pg error is wrapped as FusionError('store_error') with the pg code
 * and the constraint kind, so no caller above `store/` sees a pg error type.
 *
 * A transaction holds one pooled client from BEGIN to COMMIT; statements outside one take any
 * client. PostgreSQL's row locks (READ COMMITTED) make the store's compare-and-set UPDATEs
 * exact across daemons: a second UPDATE … WHERE state = ? waits for the first and re-checks.
 */
import type pg from 'pg';
import { importOptionalPeer } from '../contracts/optional-peers.js';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import { describeSql, type ConstraintKind, type RunResult, type SqlDb, type SqlExecutor, type SqlParam } from './sql-port.js';

/** Any constant: the advisory lock key that serialises schema migrations across daemons. */
const MIGRATION_LOCK_KEY = 0x46555331; // "FUS1"

/** int8 (COUNT, BIGSERIAL) arrives as a JS number: store values stay far below 2^53. */
const INT8_OID = 20;
function typeParsers(driver: typeof pg): pg.CustomTypesConfig {
  return {
    getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
      oid === INT8_OID ? (value: string) => Number(value) : driver.types.getTypeParser(oid, format ?? 'text')) as pg.CustomTypesConfig['getTypeParser'],
  };
}

const PG_CONSTRAINTS: Record<string, ConstraintKind> = { '23505': 'unique', '23503': 'foreign_key' };

const NETWORK_CODES: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * The server could not be reached or went away (a restart, a network loss), as opposed to a
 * statement it refused: SQLSTATE class 08, the shutdown codes 57P01–57P03, socket errors, and
 * node-postgres's own messages for a lost or never-made connection. `details.unreachable`
 * lets a caller wait for the database instead of failing the work (docs/operations.md#cluster-mode).
 */
function isUnreachable(code: unknown, message: string): boolean {
  if (typeof code === 'string' && (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || NETWORK_CODES.has(code))) return true;
  return /Connection terminated|connection error|timeout exceeded when trying to connect|Connection refused/iu.test(message);
}

function wrapError(err: unknown, action: string): FusionError {
  if (err instanceof FusionError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown } | null)?.code;
  const details: Record<string, unknown> = typeof code === 'string' ? { pgCode: code } : {};
  const constraint = typeof code === 'string' ? PG_CONSTRAINTS[code] : undefined;
  if (constraint !== undefined) details.constraint = constraint;
  if (isUnreachable(code, message)) details.unreachable = true;
  return new FusionError('store_error', `store ${action} failed: ${message}`, { cause: err, details });
}

const translated = new Map<string, string>();

/** `?` → `$1, $2, …`, outside quoted literals and identifiers (the store's SQL has no other `?`). */
export function toPgPlaceholders(sql: string): string {
  const cached = translated.get(sql);
  if (cached !== undefined) return cached;
  let out = '';
  let n = 0;
  let quote: string | null = null;
  for (const ch of sql) {
    if (quote !== null) {
      if (ch === quote) quote = null;
      out += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      out += ch;
    } else if (ch === '?') {
      n += 1;
      out += `$${n}`;
    } else {
      out += ch;
    }
  }
  translated.set(sql, out);
  return out;
}

/** The connection string with its password masked, for logs and diagnostics. */
export function redactDatabaseUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://(unparsable)';
  }
}

type Queryable = pg.Pool | pg.PoolClient;

function executor(client: Queryable, isActive: () => boolean = () => true): SqlExecutor {
  const query = async <T>(sql: string, params: readonly SqlParam[] | undefined, action: string): Promise<pg.QueryResult<T & pg.QueryResultRow>> => {
    if (!isActive()) throw new FusionError('store_error', 'transaction already finished');
    try {
      return await client.query<T & pg.QueryResultRow>(toPgPlaceholders(sql), params === undefined ? [] : [...params]);
    } catch (err) {
      throw wrapError(err, `${action} (${describeSql(sql)})`);
    }
  };
  return {
    run: async (sql, params): Promise<RunResult> => ({ changes: (await query(sql, params, 'run')).rowCount ?? 0 }),
    get: async <T>(sql: string, params?: readonly SqlParam[]) => (await query<T>(sql, params, 'get')).rows[0] as T | undefined,
    all: async <T>(sql: string, params?: readonly SqlParam[]) => (await query<T>(sql, params, 'all')).rows as T[],
    exec: async (sql) => {
      if (!isActive()) throw new FusionError('store_error', 'transaction already finished');
      try {
        // No parameters: the simple query protocol, which runs several statements in one call.
        await client.query(sql);
      } catch (err) {
        throw wrapError(err, `exec (${describeSql(sql)})`);
      }
    },
  };
}

export class PgDb implements SqlDb {
  readonly engine = 'postgres' as const;
  private closing = false;
  /** Operations under way: close waits for them, as SQLite's queue finishes what was queued. */
  private readonly inflight = new Set<Promise<unknown>>();
  private readonly direct: SqlExecutor;

  private constructor(private readonly pool: pg.Pool, private readonly log: Logger) {
    this.direct = executor(pool, () => this.checkOpen());
  }

  private track<T>(op: Promise<T>): Promise<T> {
    this.inflight.add(op);
    void op.catch(() => undefined).finally(() => this.inflight.delete(op));
    return op;
  }

  /** Connects once (so a wrong URL fails at start-up, not on the first request). */
  static async open(url: string, log: Logger, options: { maxConnections?: number } = {}): Promise<PgDb> {
    // The driver is loaded here, not with the module: a daemon on SQLite never connects.
    const driver = (await importOptionalPeer(() => import('pg'))).default;
    const pool = new driver.Pool({ connectionString: url, max: options.maxConnections ?? 10, types: typeParsers(driver), connectionTimeoutMillis: 10_000 });
    // An idle client's error (server restart) is emitted on the pool; never let it crash the process.
    pool.on('error', (err) => log.error({ err: wrapError(err, 'idle client') }, 'postgres pool error'));
    try {
      const client = await pool.connect();
      client.release();
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw wrapError(err, `connect to ${redactDatabaseUrl(url)}`);
    }
    return new PgDb(pool, log);
  }

  get isOpen(): boolean {
    return !this.closing;
  }

  run(sql: string, params?: readonly SqlParam[]): Promise<RunResult> {
    return this.track(this.direct.run(sql, params));
  }

  get<T>(sql: string, params?: readonly SqlParam[]): Promise<T | undefined> {
    return this.track(this.direct.get<T>(sql, params));
  }

  all<T>(sql: string, params?: readonly SqlParam[]): Promise<T[]> {
    return this.track(this.direct.all<T>(sql, params));
  }

  exec(sql: string): Promise<void> {
    return this.track(this.direct.exec(sql));
  }

  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.track(this.inTransaction(null, fn));
  }

  /** PostgreSQL commits concurrent transactions on their own connections: nothing to group. */
  groupTransaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.transaction(fn);
  }

  migrationTransaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.track(this.inTransaction(`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`, fn));
  }

  /** A raw pooled client for LISTEN (events across daemons); the caller releases it. */
  async connectListener(): Promise<pg.PoolClient> {
    this.checkOpen();
    try {
      return await this.pool.connect();
    } catch (err) {
      throw wrapError(err, 'connect');
    }
  }

  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    await Promise.allSettled([...this.inflight]);
    await this.pool.end().catch((err: unknown) => this.log.warn({ err: wrapError(err, 'close') }, 'postgres pool close failed'));
  }

  private checkOpen(): boolean {
    if (this.closing) throw new FusionError('store_error', 'store is closed');
    return true;
  }

  private async inTransaction<T>(lockSql: string | null, fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.checkOpen();
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw wrapError(err, 'connect');
    }
    let active = true;
    const tx = executor(client, () => active);
    let broken: unknown = undefined;
    try {
      await tx.exec('BEGIN');
      if (lockSql !== null) await tx.exec(lockSql);
      let value: T;
      try {
        value = await fn(tx);
      } catch (err) {
        active = false;
        await client.query('ROLLBACK').catch((rollbackErr: unknown) => {
          broken = rollbackErr;
          this.log.warn({ err: wrapError(rollbackErr, 'rollback') }, 'postgres rollback failed');
        });
        throw err;
      }
      try {
        await client.query('COMMIT');
      } catch (err) {
        broken = err;
        throw wrapError(err, 'commit');
      } finally {
        active = false;
      }
      return value;
    } finally {
      active = false;
      // A client whose connection failed mid-transaction is destroyed rather than reused.
      client.release(broken instanceof Error ? broken : undefined);
    }
  }
}
