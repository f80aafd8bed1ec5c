/**
 * One daemon per data directory (docs/operations.md#one-daemon-per-data-directory): a second
 * daemon on the same `FUSION_HOME` would take the first one's running work for a dead daemon's
 * (reap its containers, resume or fail its tasks), so the data directory has an owner, held for
 * the daemon's life and taken before anything in it is looked at.
 *
 * The lock is a kernel lock, so a daemon killed with SIGKILL never leaves one behind: Node has no
 * flock(2), but SQLite locks its file with fcntl(2), which the kernel drops when the process dies.
 * `daemon.lock` is a tiny database opened in exclusive locking mode and written once, so its
 * connection holds the write lock until it is closed; any other connection, in this process or
 * another, gets SQLITE_BUSY at once. The file is never removed (removing a lock file another
 * process has just opened would let two owners lock two different files).
 *
 * The lock cannot be read while it is held, so the owner's pid and socket go in `daemon.json`
 * beside it (written after the lock is taken, removed on release, read by data-dir-record.ts),
 * for the refusal message and for clients looking for the data directory's daemon.
 */
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type sqlite3 from 'sqlite3';
import { DATA_DIR_OWNER_FILE, readDataDirOwner, type DataDirOwner } from './data-dir-record.js';
import { isStorageFull } from './storage-full.js';
import { FusionError } from '../errors.js';
import { importOptionalPeer } from '../contracts/optional-peers.js';

export const DATA_DIR_LOCK_FILE = 'daemon.lock';
export { readDataDirOwner };

export interface DataDirLock {
  /** Gives the data directory up (the owner record first, then the kernel lock). */
  release(): Promise<void>;
}

const TAKE = [
  'PRAGMA locking_mode=EXCLUSIVE',
  // No journal file: on a full disk a restart must still take the lock (the daemon then starts
  // read-only, docs/behaviour.md#b13-storage), and rewriting the one row in place needs no space.
  'PRAGMA journal_mode=OFF',
  // Its content does not matter, only the lock: no fsync on the start-up path.
  'PRAGMA synchronous=OFF',
  'BEGIN EXCLUSIVE',
  'CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL)',
  'DELETE FROM holder',
  `INSERT INTO holder (pid) VALUES (${process.pid})`,
  'COMMIT',
].join(';\n');

async function openDb(file: string): Promise<sqlite3.Database> {
  const driver = (await importOptionalPeer(() => import('sqlite3'))).default;
  return new Promise((resolve, reject) => {
    const db = new driver.Database(file, driver.OPEN_READWRITE | driver.OPEN_CREATE, (err) => (err ? reject(err) : resolve(db)));
  });
}

const exec = (db: sqlite3.Database, sql: string): Promise<void> => new Promise((resolve, reject) => db.exec(sql, (err) => (err ? reject(err) : resolve())));
const close = (db: sqlite3.Database): Promise<void> => new Promise((resolve) => db.close(() => resolve()));

function inUse(home: string): FusionError {
  const owner = readDataDirOwner(home);
  const who = owner === null
    ? 'another fusion daemon (it is still starting or stopping)'
    : owner.holder !== undefined
      ? `${owner.holder} pid ${owner.pid}${owner.startedAt ? ` (started ${owner.startedAt})` : ''}`
      : `the fusion daemon pid ${owner.pid} (socket ${owner.socket}${owner.startedAt ? `, started ${owner.startedAt}` : ''})`;
  return new FusionError(
    'invalid_config',
    `data directory ${home} is in use by ${who}; one daemon owns a data directory at a time: stop that daemon first, or give this one its own with --data or FUSION_HOME`,
    { details: { field: 'data', path: home, ...(owner === null ? {} : { ownerPid: owner.pid, ownerSocket: owner.socket }) } },
  );
}

/** Takes the data directory for this process, or refuses with the running owner's pid and socket. */
export async function takeDataDirLock(home: string, owner: { socket: string; holder?: string }): Promise<DataDirLock> {
  const file = join(home, DATA_DIR_LOCK_FILE);
  let db: sqlite3.Database;
  try {
    db = await openDb(file);
  } catch (err) {
    if (err instanceof FusionError) throw err;
    throw new FusionError('invalid_config', `cannot open the data directory lock ${file}: ${(err as Error).message}`, { cause: err, details: { field: 'data', path: file } });
  }
  try {
    await exec(db, TAKE);
  } catch (err) {
    await close(db);
    if ((err as { code?: string }).code === 'SQLITE_BUSY') throw inUse(home);
    throw new FusionError('invalid_config', `cannot take the data directory lock ${file}: ${(err as Error).message}; if the file is damaged, remove it while no daemon runs`, { cause: err, details: { field: 'data', path: file } });
  }
  const record: DataDirOwner = { pid: process.pid, socket: owner.socket, startedAt: new Date().toISOString(), ...(owner.holder !== undefined ? { holder: owner.holder } : {}) };
  try {
    // Renamed into place whole (a reader never sees half of it); not fsynced: it only names the
    // owner for a refusal message, and a crash leaves the lock free anyway.
    const file = join(home, DATA_DIR_OWNER_FILE);
    const tmp = `${file}.tmp-${process.pid}`;
    try {
      writeFileSync(tmp, `${JSON.stringify(record)}\n`, { mode: 0o600 });
      renameSync(tmp, file);
    } catch (err) {
      rmSync(tmp, { force: true });
      // On a full disk the daemon still starts (read-only, docs/behaviour.md#b13-storage): the
      // lock is what counts; without the record a refused second daemon names no pid.
      if (!isStorageFull(err)) throw err;
      rmSync(file, { force: true });
    }
  } catch (err) {
    await close(db);
    throw err;
  }
  let released: Promise<void> | undefined;
  return {
    release: () =>
      (released ??= (async () => {
        rmSync(join(home, DATA_DIR_OWNER_FILE), { force: true });
        await close(db);
      })()),
  };
}
