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
      await sleep(5); // the interleaving is the subject: the outside statement is issued meanwhile
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

  describe('groupTransaction (group commit)', () => {
    it('batches callers that arrive while a commit is in flight into one transaction; each resolves with its own value', async () => {
      // The first group starts at once; the next nine queue behind it and share one commit.
      const values = await Promise.all(Array.from({ length: 10 }, (_, i) => db.groupTransaction(async (tx) => {
        await tx.run('INSERT INTO t (who, n) VALUES (?, ?)', ['g', i]);
        return i;
      })));
      expect(values).toEqual([...Array(10).keys()]);
      const rows = await db.all<{ n: number }>('SELECT n FROM t ORDER BY id');
      expect(rows.map((r) => r.n)).toEqual([...Array(10).keys()]);
    });

    it('a failing member rolls back only its own rows and rejects only its own caller', async () => {
      const ok = (n: number) => db.groupTransaction(async (tx) => {
        await tx.run('INSERT INTO t (who, n) VALUES (?, ?)', ['ok', n]);
        return n;
      });
      const failing = db.groupTransaction(async (tx) => {
        await tx.run("INSERT INTO t (who, n) VALUES ('doomed', 9)");
        throw new Error('boom');
      });
      const dup = db.groupTransaction(async (tx) => {
        await tx.run("INSERT INTO t (id, who, n) VALUES (1000, 'x', 1)");
        await tx.run("INSERT INTO t (id, who, n) VALUES (1000, 'x', 2)"); // UNIQUE violation
      });
      const results = await Promise.allSettled([ok(1), failing, ok(2), dup, ok(3)]);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled']);
      expect(((results[1] as PromiseRejectedResult).reason as Error).message).toBe('boom');
      expect(sqliteCodeOf((results[3] as PromiseRejectedResult).reason)).toBe('SQLITE_CONSTRAINT');
      const rows = await db.all<{ who: string; n: number }>('SELECT who, n FROM t ORDER BY id');
      expect(rows).toEqual([{ who: 'ok', n: 1 }, { who: 'ok', n: 2 }, { who: 'ok', n: 3 }]);
    });

    it('keeps FIFO order with plain statements and transactions queued around it', async () => {
      const order: string[] = [];
      const a = db.transaction(async (tx) => {
        await tx.run("INSERT INTO t (who, n) VALUES ('tx', 0)");
        order.push('tx');
      });
      const g1 = db.groupTransaction(async (tx) => {
        await tx.run("INSERT INTO t (who, n) VALUES ('g', 1)");
        order.push('g1');
      });
      const g2 = db.groupTransaction(async (tx) => {
        await tx.run("INSERT INTO t (who, n) VALUES ('g', 2)");
        order.push('g2');
      });
      const count = db.get<{ c: number }>('SELECT COUNT(*) AS c FROM t');
      await Promise.all([a, g1, g2]);
      expect(order).toEqual(['tx', 'g1', 'g2']);
      expect((await count)?.c).toBe(3);
    });

    it('rejects every member when the store is closed before the group runs', async () => {
      await db.close();
      await expect(db.groupTransaction(async () => 1)).rejects.toMatchObject({ code: 'store_error' });
      db = await SqliteDb.open(tmp.file, silentLogger());
    });
  });
});
