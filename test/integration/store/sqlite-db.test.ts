/** The promise wrapper: one queue, transactions that never interleave, wrapped errors. */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FusionError } from '../../../src/errors.js';
import { silentLogger } from '../../../src/log.js';
import { SqliteDb, sqliteCodeOf, type SqlExecutor } from '../../../src/store/sqlite-db.js';
import { tempDir, type TempDir } from './helpers.js';

let tmp: TempDir;
let db: SqliteDb;

beforeEach(async () => {
  tmp = await tempDir();
  db = await SqliteDb.open(tmp.file, silentLogger());
  await db.exec('PRAGMA journal_mode = WAL; CREATE TABLE t (id INTEGER PRIMARY KEY, who TEXT NOT NULL, n INTEGER NOT NULL)');
});

afterEach(async () => {
  await db.close();
  await tmp.cleanup();
});

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(() => undefined, (e: unknown) => e);
}

describe('SqliteDb', () => {
  it('runs concurrent transactions one after the other, never interleaved', async () => {
    const trace: string[] = [];
    const work = (who: string) => async (tx: SqlExecutor): Promise<number> => {
      trace.push(`${who}:begin`);
      const before = (await tx.get<{ c: number }>('SELECT COUNT(*) AS c FROM t'))?.c ?? -1;
      for (let n = 0; n < 3; n += 1) {
        await sleep(2); // give the other callers every chance to cut in
        await tx.run('INSERT INTO t (who, n) VALUES (?, ?)', [who, n]);
        trace.push(`${who}:${n}`);
      }
      trace.push(`${who}:end`);
      return before;
    };
    const counts = await Promise.all(['a', 'b', 'c'].map((who) => db.transaction(work(who))));
    expect(counts).toEqual([0, 3, 6]);
    expect(trace).toEqual(['a', 'b', 'c'].flatMap((w) => [`${w}:begin`, `${w}:0`, `${w}:1`, `${w}:2`, `${w}:end`]));
    const rows = await db.all<{ who: string }>('SELECT who FROM t ORDER BY id');
    expect(rows.map((r) => r.who).join('')).toBe('aaabbbccc');
  });

  it('rolls back on a throw, and a statement issued meanwhile is not swept into the rollback', async () => {
    const failing = db.transaction(async (tx) => {
      await tx.run("INSERT INTO t (who, n) VALUES ('doomed', 1)");
      await sleep(5);
      throw new Error('boom');
    });
    const outside = db.run("INSERT INTO t (who, n) VALUES ('outside', 1)");
    const err = await rejection(failing);
    expect((err as Error).message).toBe('boom'); // the caller's own error comes back unchanged
    await outside;
    const rows = await db.all<{ who: string }>('SELECT who FROM t');
    expect(rows.map((r) => r.who)).toEqual(['outside']);
  });

  it('wraps sqlite errors as store_error with the sqlite code and cause', async () => {
    const err = await rejection(db.run('INSERT INTO t (who, n) VALUES (NULL, 1)'));
    expect(err).toBeInstanceOf(FusionError);
    expect((err as FusionError).code).toBe('store_error');
    expect(sqliteCodeOf(err)).toBe('SQLITE_CONSTRAINT');
    expect((err as FusionError).cause).toBeInstanceOf(Error);
    const syntax = await rejection(db.transaction((tx) => tx.exec('SELEKT 1')));
    expect((syntax as FusionError).code).toBe('store_error');
    // The queue keeps working after failures.
    expect(await db.get<{ one: number }>('SELECT 1 AS one')).toEqual({ one: 1 });
  });

  it('refuses a transaction handle used after its transaction ended', async () => {
    let leaked: SqlExecutor | undefined;
    await db.transaction(async (tx) => {
      leaked = tx;
    });
    const err = await rejection(leaked?.run("INSERT INTO t (who, n) VALUES ('late', 1)") ?? Promise.resolve());
    expect((err as FusionError).code).toBe('store_error');
    expect(await db.all('SELECT * FROM t')).toEqual([]);
  });

  it('fails with store_error after close', async () => {
    await db.close();
    for (const op of [db.get('SELECT 1'), db.exec('SELECT 1'), db.transaction(async () => 1)]) {
      const err = await rejection(op);
      expect(err).toBeInstanceOf(FusionError);
      expect((err as FusionError).code).toBe('store_error');
    }
    db = await SqliteDb.open(tmp.file, silentLogger()); // for afterEach
  });
});
