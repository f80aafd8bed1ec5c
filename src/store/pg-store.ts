/**
 * Opens the PostgreSQL adapters (cluster mode, `FUSION_DATABASE_URL` / `--database-url`): the
 * task store and the research stores, each over its own pool, both with the one SQL
 * implementation that SQLite uses (sqlite-store.ts, research-sqlite-store.ts). Migrations run
 * under an advisory lock, so daemons starting together migrate once.
 */
import type { Logger } from '../log.js';
import type { Store } from './port.js';
import { migrate } from './migrations.js';
import { PgDb, redactDatabaseUrl } from './pg-db.js';
import { SqlStoreImpl } from './sqlite-store.js';
import { ResearchSqlStoreImpl, type ResearchSqliteStore } from './research-sqlite-store.js';

export interface PgStoreOptions {
  /** postgres:// or postgresql:// connection string. */
  url: string;
  log: Logger;
  maxConnections?: number;
}

/** The task store on PostgreSQL; `file` is the URL with its password masked. */
export type PgStore = Store & {
  readonly file: string;
  readonly db: PgDb;
  databaseFacts(): Promise<Record<string, unknown>>;
  clusterId(): Promise<string>;
};

export async function openPgStore(options: PgStoreOptions): Promise<PgStore> {
  const log = options.log.child({ component: 'store' });
  const db = await PgDb.open(options.url, log, options.maxConnections === undefined ? {} : { maxConnections: options.maxConnections });
  try {
    const store = new SqlStoreImpl(db, log, redactDatabaseUrl(options.url));
    await store.init();
    return Object.assign(store, { db });
  } catch (err) {
    await db.close();
    throw err;
  }
}

export type ResearchPgStore = ResearchSqliteStore;

export async function openResearchPgStore(options: PgStoreOptions): Promise<ResearchPgStore> {
  const log = options.log.child({ component: 'research-store' });
  const db = await PgDb.open(options.url, log, { maxConnections: options.maxConnections ?? 5 });
  try {
    await migrate(db, log);
  } catch (err) {
    await db.close();
    throw err;
  }
  return new ResearchSqlStoreImpl(db, redactDatabaseUrl(options.url));
}
