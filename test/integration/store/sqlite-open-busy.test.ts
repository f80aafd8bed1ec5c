/**
 * A second connection opened while another one holds the file (a daemon writing while the CLI or an
 * admin script opens the same store) waits for the lock instead of failing SQLITE_BUSY: the busy
 * timeout is set before the first statement that may need a lock (switching to WAL). node-sqlite3's
 * own default is 1 s, which a loaded host exceeded.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { SqliteDb } from '../../../src/store/sqlite-db.js';
import { openConfiguredDb } from '../../../src/store/sqlite-store.js';
import { tempDir, type TempDir } from './helpers.js';

let tmp: TempDir;
let holder: SqliteDb;

beforeEach(async () => {
  tmp = await tempDir();
  // A file still in rollback-journal mode (as a store is until its first configured open), held
  // by an exclusive transaction: switching it to WAL needs that lock.
  holder = await SqliteDb.open(tmp.file, silentLogger());
  await holder.exec('CREATE TABLE t (n INTEGER)');
  await holder.exec('BEGIN EXCLUSIVE; INSERT INTO t VALUES (1)');
});

afterEach(async () => {
  await holder.close();
  await tmp.cleanup();
});

it('an open that meets a held lock waits for it, then configures WAL', async () => {
  const opening = openConfiguredDb(tmp.file, silentLogger());
  const outcome = opening.then(() => 'opened', (err: unknown) => err);
  // The open must still be waiting while the lock is held, past the driver's default busy timeout
  // of 1 s (the delay is the subject of this test)…
  const early = await Promise.race([outcome, sleep(1500).then(() => 'waiting')]);
  expect(early).toBe('waiting');
  await holder.exec('COMMIT');
  // …and succeed once it is released.
  expect(await outcome).toBe('opened');
  const db = await opening;
  expect(await db.get<{ journal_mode: string }>('PRAGMA journal_mode')).toEqual({ journal_mode: 'wal' });
  await db.close();
});
