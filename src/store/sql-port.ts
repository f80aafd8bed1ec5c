/**
 * The SQL connection as the store adapters see it, the same for SQLite and PostgreSQL: one
 * dialect of SQL (`?` placeholders, ON CONFLICT, RETURNING, a `rowid` column to order by), one
 * transaction shape, and errors already wrapped as FusionError('store_error') with the kind of
 * constraint that failed, so the store code above never looks at an engine's error type.
 */
import { FusionError } from '../errors.js';

/** What both engines bind: booleans are stored as 0/1 by the callers, explicitly. */
export type SqlParam = string | number | bigint | null | Buffer;

export interface RunResult {
  /** Rows the statement inserted, updated or deleted. */
  changes: number;
}

/** Statement execution, the same inside and outside a transaction. */
export interface SqlExecutor {
  run(sql: string, params?: readonly SqlParam[]): Promise<RunResult>;
  get<T>(sql: string, params?: readonly SqlParam[]): Promise<T | undefined>;
  all<T>(sql: string, params?: readonly SqlParam[]): Promise<T[]>;
  exec(sql: string): Promise<void>;
}

export type SqlEngine = 'sqlite' | 'postgres';

/** A database: statements, transactions (atomic, rolled back on any throw), close. */
export interface SqlDb extends SqlExecutor {
  readonly engine: SqlEngine;
  readonly isOpen: boolean;
  /**
   * Runs `fn` in one transaction. Any throw rolls back and is rethrown unchanged. `fn` must use
   * only the executor it is given (the SQLite adapter queues everything behind an open
   * transaction, so using the db itself from inside would wait forever).
   */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /**
   * Like `transaction`, but first takes the cross-process lock that serialises schema
   * migrations (SQLite's BEGIN IMMEDIATE write lock; a PostgreSQL advisory lock).
   */
  migrationTransaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /**
   * A transaction that may share its commit with concurrent callers (SQLite's group commit: one
   * fsync for every caller queued behind an in-flight commit, each in its own savepoint). An
   * engine whose commits do not serialise (PostgreSQL) runs it as a plain transaction.
   */
  groupTransaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** The constraint kinds the store reacts to; engines report them differently. */
export type ConstraintKind = 'unique' | 'foreign_key';

/** The constraint a wrapped store_error reports, if it was a constraint violation. */
export function constraintOf(err: unknown): ConstraintKind | undefined {
  if (!(err instanceof FusionError)) return undefined;
  const kind = err.details.constraint;
  return kind === 'unique' || kind === 'foreign_key' ? kind : undefined;
}

/** Short SQL text for error messages (statement kind and table, never the bound values). */
export function describeSql(sql: string): string {
  const flat = sql.replace(/\s+/g, ' ').trim();
  return flat.length <= 60 ? flat : `${flat.slice(0, 60)}…`;
}
