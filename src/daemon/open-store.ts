/**
 * The task store: the shared PostgreSQL database in cluster mode, otherwise the data directory's
 * SQLite file; closed by the lifecycle once nothing above it runs.
 */
import type { Logger } from '../log.js';
import type { DaemonConfig } from '../contracts/config.js';
import { openSqliteStore, type SqliteStore } from '../store/sqlite-store.js';
import { openPgStore, type PgStore } from '../store/pg-store.js';
import type { Store } from '../store/port.js';
import { dataPaths } from '../tasks/paths.js';
import type { DaemonOverrides } from './types.js';
import type { Lifecycle } from './lifecycle.js';

export interface OpenedStore {
  /** The store as opened (its facts for /v1/health, its file). */
  opened: PgStore | SqliteStore;
  /** The store the daemon uses (the opened one, wrapped by a test seam if given). */
  store: Store;
  /** Set in cluster mode (the shared database's leases and signals use it). */
  pgStore: PgStore | undefined;
}

export async function openTaskStore(config: DaemonConfig, overrides: Pick<DaemonOverrides, 'wrapStore'>, log: Logger, life: Lifecycle): Promise<OpenedStore> {
  const pgStore = config.databaseUrl !== undefined ? await openPgStore({ url: config.databaseUrl, log }) : undefined;
  const opened = pgStore ?? (await openSqliteStore({ file: dataPaths(config.home).dbFile, log }));
  const store = overrides.wrapStore ? overrides.wrapStore(opened) : opened;
  life.defer('closing the store', () => store.close());
  return { opened, store, pgStore };
}
