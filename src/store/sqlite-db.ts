/**
 * A small promise wrapper over sqlite3's callback API, with one exclusive queue.
 *
 * The daemon holds ONE connection. sqlite3 would happily run a statement from another async
 * caller between our BEGIN IMMEDIATE and COMMIT, and that statement would silently join (and
 * be rolled back with) someone else's transaction. So every operation, single statement or
 * whole transaction, takes its turn in one FIFO queue: nothing ever interleaves with an open
 * transaction. Every sqlite error is wrapped as FusionError('store_error') here, so no caller
 * above `store/` ever sees a sqlite error type.
 */
import { open as openFile, chmod } from 'node:fs/promises';
import type sqlite3 from 'sqlite3';
import { importOptionalPeer } from '../contracts/optional-peers.js';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import { describeSql as describe, type ConstraintKind, type RunResult, type SqlDb, type SqlExecutor, type SqlParam } from './sql-port.js';

export type { RunResult, SqlExecutor, SqlParam } from './sql-port.js';

/** sqlite also reports the rowid of the last insert. */
export interface SqliteRunResult extends RunResult {
  lastId: number;
}

/** Extended sqlite result code ('SQLITE_CONSTRAINT', …) carried by a wrapped error, if any. */
export function sqliteCodeOf(err: unknown): string | undefined {
  if (err instanceof FusionError && typeof err.details.sqliteCode === 'string') return err.details.sqliteCode;
  return undefined;
}

function wrapError(err: unknown, action: string): FusionError {
  if (err instanceof FusionError) return err;
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown } | null)?.code;
  const details: Record<string, unknown> = typeof code === 'string' ? { sqliteCode: code } : {};
  const constraint = constraintKind(code, message);
  if (constraint !== undefined) details.constraint = constraint;
  return new FusionError('store_error', `store ${action} failed: ${message}`, { cause: err, details });
}

/** sqlite names the constraint only in its message ("UNIQUE constraint failed: …"). */
function constraintKind(code: unknown, message: string): ConstraintKind | undefined {
  if (code !== 'SQLITE_CONSTRAINT') return undefined;
  if (message.includes('UNIQUE constraint failed')) return 'unique';
  if (message.includes('FOREIGN KEY constraint failed')) return 'foreign_key';
  return undefined;
}

export class SqliteDb implements SqlDb {
  readonly engine = 'sqlite' as const;
  private tail: Promise<unknown> = Promise.resolve();
  /** The group-commit batch queued but not started yet (joined by later callers). */
  private pendingGroup: GroupMember[] | undefined;
  private closing = false;
  private closed = false;
  private readonly raw: SqlExecutor;

  private constructor(private readonly db: sqlite3.Database, private readonly log: Logger) {
    this.raw = {
      run: (sql, params = []) => this.rawRun(sql, params),
      get: <T>(sql: string, params: readonly SqlParam[] = []) => this.rawGet<T>(sql, params),
      all: <T>(sql: string, params: readonly SqlParam[] = []) => this.rawAll<T>(sql, params),
      exec: (sql) => this.rawExec(sql),
    };
  }

  /**
   * Opens (creating if absent) the database file. The file is created by us with mode 0600
   * before sqlite sees it: the store holds API key digests and task inputs, and sqlite would
   * otherwise create it with 0644 under a usual umask. The -wal and -shm files inherit the
   * main file's permissions (sqlite's unix VFS copies them).
   */
  static async open(file: string, log: Logger): Promise<SqliteDb> {
    // The driver is loaded here, not with the module: a daemon on PostgreSQL never opens one.
    const driver = (await importOptionalPeer(() => import('sqlite3'))).default;
    await createPrivateFile(file, log);
    const db = await new Promise<sqlite3.Database>((resolve, reject) => {
      const mode = driver.OPEN_READWRITE | driver.OPEN_CREATE | driver.OPEN_FULLMUTEX;
      const handle: sqlite3.Database = new driver.Database(file, mode, (err) => {
        if (err) reject(wrapError(err, 'open'));
        else resolve(handle);
      });
    });
    // Errors without a callback would be emitted; never let one crash the process.
    db.on('error', (err: Error) => log.error({ err: wrapError(err, 'event') }, 'sqlite error event'));
    return new SqliteDb(db, log);
  }

  get isOpen(): boolean {
    return !this.closing;
  }

  run(sql: string, params: readonly SqlParam[] = []): Promise<SqliteRunResult> {
    return this.exclusive(() => this.rawRun(sql, params));
  }

  get<T>(sql: string, params: readonly SqlParam[] = []): Promise<T | undefined> {
    return this.exclusive(() => this.raw.get<T>(sql, params));
  }

  all<T>(sql: string, params: readonly SqlParam[] = []): Promise<T[]> {
    return this.exclusive(() => this.raw.all<T>(sql, params));
  }

  exec(sql: string): Promise<void> {
    return this.exclusive(() => this.raw.exec(sql));
  }

  /**
   * An executor for one transaction (or savepoint) that refuses use once `end()` is called: a
   * caller that kept it past its scope would otherwise write into whatever runs next.
   */
  private scopedExecutor(): { tx: SqlExecutor; end: () => void } {
    let active = true;
    const check = (): void => {
      if (!active) throw new FusionError('store_error', 'transaction already finished');
    };
    const tx: SqlExecutor = {
      run: async (sql, params) => { check(); return this.raw.run(sql, params); },
      get: async <R>(sql: string, params?: readonly SqlParam[]) => { check(); return this.raw.get<R>(sql, params); },
      all: async <R>(sql: string, params?: readonly SqlParam[]) => { check(); return this.raw.all<R>(sql, params); },
      exec: async (sql) => { check(); return this.raw.exec(sql); },
    };
    return { tx, end: () => { active = false; } };
  }

  /**
   * Runs `fn` inside BEGIN IMMEDIATE … COMMIT, after every earlier queued operation and before
   * any later one. Any throw rolls back and is rethrown unchanged (sqlite errors arrive wrapped). `fn` must use
   * only the executor it is given; calling this db's own methods from inside would wait for
   * the transaction to end, i.e. forever. The executor refuses use after the transaction ends.
   */
  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.exclusive(async () => {
      const { tx, end } = this.scopedExecutor();
      await this.raw.exec('BEGIN IMMEDIATE');
      try {
        const value = await fn(tx);
        end();
        await this.raw.exec('COMMIT');
        return value;
      } catch (err) {
        end();
        await this.raw.exec('ROLLBACK').catch((rollbackErr: unknown) => {
          // sqlite may already have rolled back by itself (e.g. on SQLITE_FULL); keep the first error.
          this.log.warn({ err: rollbackErr }, 'sqlite rollback failed');
        });
        // sqlite errors are already wrapped by the executor; anything else is the caller's own.
        throw err;
      }
    });
  }

  /** BEGIN IMMEDIATE already holds the file's write lock across processes. */
  migrationTransaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.transaction(fn);
  }

  /**
   * Group commit: like `transaction`, but every `groupTransaction` call that arrives while an
   * earlier commit is in flight (queued behind it) shares one BEGIN IMMEDIATE … COMMIT, hence one
   * fsync. A throw rolls back only that caller's rows (runGroup) and
   * rejects only that caller; the others resolve once the shared COMMIT is durable. If the
   * COMMIT fails (or sqlite abandoned the transaction, e.g. on SQLITE_FULL), every caller of the
   * group is rejected: none of their rows were committed. `fn` must be short and must use only
   * the executor it is given (it runs between other callers' statements in the same transaction),
   * and may run twice: when a member throws, the group runs again member by member (runGroup).
   */
  groupTransaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const member: GroupMember = { fn: fn as GroupMember['fn'], resolve: resolve as GroupMember['resolve'], reject };
      if (this.pendingGroup !== undefined && this.pendingGroup.length < MAX_GROUP) {
        this.pendingGroup.push(member);
        return;
      }
      const group: GroupMember[] = [member];
      this.pendingGroup = group;
      this.exclusive(() => {
        // Later arrivals form the next group, queued behind this commit.
        if (this.pendingGroup === group) this.pendingGroup = undefined;
        return this.runGroup(group);
      }).catch((err: unknown) => {
        // Never started (the store closed): later callers must not join a group that will not run.
        if (this.pendingGroup === group) this.pendingGroup = undefined;
        for (const m of group) m.reject(err);
      });
    });
  }

  /**
   * Runs the group in one transaction. First every member without a savepoint (two statements
   * fewer per member, the common case: members rarely fail); when one throws, the whole
   * transaction is rolled back and the group runs again with a savepoint per member, so only the
   * failing members are rejected. A member's `fn` may therefore run twice; it touches nothing but
   * its executor.
   */
  private async runGroup(group: readonly GroupMember[]): Promise<void> {
    const fast = await this.runMembers(group, false);
    const outcomes = fast ?? (await this.runMembers(group, true));
    if (outcomes === null) throw new FusionError('store_error', 'group commit: a member failed in the careful run');
    // Durable now: each member learns its own outcome.
    group.forEach((m, i) => {
      const o = outcomes[i]!;
      if (o.ok) m.resolve(o.value);
      else m.reject(o.err);
    });
  }

  /**
   * One run of the group's members inside BEGIN IMMEDIATE … COMMIT. `careful`: each member in
   * its own SAVEPOINT, a throw rolls back only its rows. Not careful: the first throw rolls the
   * whole transaction back and the answer is null (run it again carefully).
   */
  private async runMembers(group: readonly GroupMember[], careful: boolean): Promise<MemberOutcome[] | null> {
    const outcomes: MemberOutcome[] = [];
    await this.raw.exec('BEGIN IMMEDIATE');
    try {
      for (const m of group) {
        const { tx, end } = this.scopedExecutor();
        if (careful) await this.raw.exec('SAVEPOINT group_member');
        try {
          const value = await m.fn(tx);
          end();
          if (careful) await this.raw.exec('RELEASE group_member');
          outcomes.push({ ok: true, value });
        } catch (err) {
          end();
          if (!careful) {
            // sqlite may have rolled back by itself (e.g. on SQLITE_FULL); the careful run shows why.
            await this.raw.exec('ROLLBACK').catch(() => undefined);
            return null;
          }
          // A failing ROLLBACK TO means sqlite abandoned the whole transaction: the group fails.
          await this.raw.exec('ROLLBACK TO group_member');
          await this.raw.exec('RELEASE group_member');
          outcomes.push({ ok: false, err });
        }
      }
      await this.raw.exec('COMMIT');
    } catch (err) {
      await this.raw.exec('ROLLBACK').catch((rollbackErr: unknown) => {
        this.log.warn({ err: rollbackErr }, 'sqlite rollback failed');
      });
      throw err;
    }
    return outcomes;
  }

  /**
   * Online backup into `file` (which must not exist yet) through sqlite's backup API: a
   * consistent copy while the daemon keeps writing. Queued like any statement, so it never
   * starts inside an open transaction of ours.
   */
  backupTo(file: string): Promise<void> {
    return this.exclusive(() => new Promise<void>((resolve, reject) => {
      this.checkOpen();
      // sqlite3 ships no typings for its Backup class; this is the part of it used here.
      const db = this.db as unknown as { backup(file: string, cb: (err: Error | null) => void): SqliteBackup };
      const backup = db.backup(file, (err: Error | null) => {
        if (err) {
          reject(wrapError(err, 'backup'));
          return;
        }
        // -1: every remaining page in one step.
        backup.step(-1, (stepErr: Error | null) => {
          if (stepErr !== null && !backup.completed) {
            backup.finish(() => reject(wrapError(stepErr, 'backup step')));
            return;
          }
          backup.finish((finishErr: Error | null) => (finishErr ? reject(wrapError(finishErr, 'backup finish')) : resolve()));
        });
      });
    }));
  }

  /** Waits for queued work, then closes. Later calls fail with store_error; a second close is a no-op. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    const done = this.tail.then(() => new Promise<void>((resolve, reject) => {
      this.db.close((err) => {
        this.closed = true;
        if (err) reject(wrapError(err, 'close'));
        else resolve();
      });
    }));
    this.tail = done.catch(() => undefined);
    await done;
  }

  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    if (this.closing) return Promise.reject(new FusionError('store_error', 'store is closed'));
    const result = this.tail.then(fn);
    this.tail = result.catch(() => undefined);
    return result;
  }

  private checkOpen(): void {
    if (this.closed) throw new FusionError('store_error', 'store is closed');
  }

  private rawRun(sql: string, params: readonly SqlParam[] = []): Promise<SqliteRunResult> {
    return new Promise((resolve, reject) => {
      this.checkOpen();
      this.db.run(sql, [...params], function (this: sqlite3.RunResult, err: Error | null) {
        if (err) reject(wrapError(err, `run (${describe(sql)})`));
        else resolve({ changes: this.changes, lastId: this.lastID });
      });
    });
  }

  private rawGet<T>(sql: string, params: readonly SqlParam[] = []): Promise<T | undefined> {
    return new Promise((resolve, reject) => {
      this.checkOpen();
      this.db.get<T>(sql, [...params], (err: Error | null, row: T | undefined) => {
        if (err) reject(wrapError(err, `get (${describe(sql)})`));
        else resolve(row);
      });
    });
  }

  private rawAll<T>(sql: string, params: readonly SqlParam[] = []): Promise<T[]> {
    return new Promise((resolve, reject) => {
      this.checkOpen();
      this.db.all<T>(sql, [...params], (err: Error | null, rows: T[]) => {
        if (err) reject(wrapError(err, `all (${describe(sql)})`));
        else resolve(rows);
      });
    });
  }

  private rawExec(sql: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.checkOpen();
      this.db.exec(sql, (err: Error | null) => {
        if (err) reject(wrapError(err, `exec (${describe(sql)})`));
        else resolve();
      });
    });
  }
}

type MemberOutcome = { ok: true; value: unknown } | { ok: false; err: unknown };

/** One caller of a group commit. */
interface GroupMember {
  fn: (tx: SqlExecutor) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** Bound on one group's size, so one commit (and its callers' wait) stays short. */
const MAX_GROUP = 256;

interface SqliteBackup {
  readonly completed: boolean;
  step(pages: number, cb: (err: Error | null) => void): void;
  finish(cb: (err: Error | null) => void): void;
}

/** Creates `file` with mode 0600 if it does not exist; an existing file is left as it is. */
async function createPrivateFile(file: string, log: Logger): Promise<void> {
  try {
    const handle = await openFile(file, 'wx', 0o600);
    await handle.close();
    // The umask can only remove bits, but be explicit rather than rely on it.
    await chmod(file, 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      log.debug({ file }, 'store file exists');
      return;
    }
    throw new FusionError('store_error', `cannot create store file ${file}: ${(err as Error).message}`, { cause: err });
  }
}
