/**
 * The task store a command without a daemon reads: the data directory's SQLite file, or in
 * cluster mode the shared PostgreSQL database (--database-url / FUSION_DATABASE_URL).
 */
import { existsSync } from 'node:fs';
import { FusionError } from '../errors.js';
import { silentLogger } from '../log.js';
import { openSqliteStore } from '../store/sqlite-store.js';
import { openPgStore } from '../store/pg-store.js';
import type { Store } from '../store/port.js';
import { dataPaths } from '../tasks/paths.js';

/** Where the tasks and their sealed tarballs are. */
export type StoreLocation = { home: string } | { url: string };

/** Opens the store; `name` says which (the file, or the URL with its password masked). */
export async function openStoreAt(where: StoreLocation): Promise<{ store: Store; name: string }> {
  if ('url' in where) {
    const store = await openPgStore({ url: where.url, log: silentLogger(), maxConnections: 1 });
    return { store, name: store.file };
  }
  const file = dataPaths(where.home).dbFile;
  if (!existsSync(file)) throw new FusionError('not_found', `no database at ${file}; pass --data DIR (or FUSION_HOME) of the daemon that ran the task, or --database-url in cluster mode`);
  return { store: await openSqliteStore({ file, log: silentLogger() }), name: file };
}

/** Whether there is a store to open at all (a data directory no daemon has used has no database). */
export function storeExists(where: StoreLocation): boolean {
  return 'url' in where || existsSync(dataPaths(where.home).dbFile);
}
