/**
 * The egress guard and the research side: its store (keys always in SQLite, where the
 * `fusion keys` commands write them; runs there too unless the admin asked for memory), its
 * dispatcher (direct, or the BullMQ queue with REDIS_URL) and its service.
 */
import type { Logger } from '../log.js';
import { FusionError } from '../errors.js';
import type { DaemonConfig } from '../contracts/config.js';
import { createGuardedFetch } from '../egress/guarded-fetch.js';
import { parseResolveList } from '../egress/resolve-list.js';
import { openResearchPgStore, type PgStore } from '../store/pg-store.js';
import { createPgLeases } from '../store/pg-leases.js';
import { openResearchSqliteStore, type ResearchSqliteStore } from '../store/research-sqlite-store.js';
import { createMemoryResearchStore } from '../store/research-memory-store.js';
import { createCrawler, buildResearchDocument } from '../research/crawl/crawler.js';
import type { CrawlerOptions } from '../research/crawl/port.js';
import { RunExecutor } from '../research/run-executor.js';
import { createDirectResearchDispatcher, type ResearchDispatcher } from '../research/dispatch.js';
import { createQueueDispatcher } from '../research/queue-dispatch.js';
import { ResearchService } from '../research/research-service.js';
import type { DaemonOverrides } from './types.js';
import type { Lifecycle } from './lifecycle.js';

export type GuardedFetch = ReturnType<typeof createGuardedFetch>;

export const RESEARCH_RESTART_MESSAGE = 'The daemon restarted before the research run finished.';

/** The egress guard for research fetches (and the brokers'); its admin seams are announced loudly by the guard. */
export function openEgress(config: DaemonConfig, log: Logger, life: Lifecycle): GuardedFetch {
  let guardedFetch: GuardedFetch;
  try {
    guardedFetch = createGuardedFetch({
      log,
      resolveOverrides: parseResolveList(config.egressResolve, 'egressResolve'),
      allowCidrs: config.egressAllowCidrs,
    });
  } catch (err) {
    throw new FusionError('invalid_config', `egress configuration is invalid: ${(err as Error).message}`, { cause: err });
  }
  life.defer('closing egress', () => guardedFetch.close());
  return guardedFetch;
}

export interface ResearchSide {
  service: ResearchService;
  /** The research SQL store (API keys; runs unless --research-store memory). */
  keys: ResearchSqliteStore;
  /** Its file (the main database's in cluster mode). */
  dbFile: string;
}

export interface ResearchInputs {
  config: DaemonConfig;
  overrides: DaemonOverrides;
  log: Logger;
  guardedFetch: GuardedFetch;
  pgStore: PgStore | undefined;
  /** The research database file of a single install (`researchDb`, else the data directory's store). */
  dbFile: string;
}

export async function startResearch(inputs: ResearchInputs, life: Lifecycle): Promise<ResearchSide> {
  const { config, overrides, log, guardedFetch, pgStore, dbFile } = inputs;
  const researchSql = config.databaseUrl !== undefined
    ? await openResearchPgStore({ url: config.databaseUrl, log })
    : await openResearchSqliteStore({ file: dbFile, log });
  life.defer('closing the research store', () => researchSql.close());
  const runStore = config.researchStore === 'memory' ? createMemoryResearchStore() : researchSql;
  if (config.researchStore === 'memory') {
    log.warn({ researchStore: 'memory' }, 'research runs are kept in memory only: they are lost when the daemon stops or restarts');
    // A queued job only finds its run in the memory of the daemon that created it.
    if (config.redisUrl) log.warn({}, 'research runs in memory with REDIS_URL: do not share this Redis with another daemon (it would not see these runs)');
  }
  const crawlerOptions: CrawlerOptions = { log, fetch: guardedFetch, ...(config.researchUserAgent ? { userAgent: config.researchUserAgent } : {}) };
  const crawler = (overrides.researchCrawler ?? createCrawler)(crawlerOptions);
  const executor = new RunExecutor({
    store: runStore,
    crawler,
    buildDocument: overrides.researchDocument ?? buildResearchDocument,
    log,
    ...(overrides.researchCancelPollMs !== undefined ? { cancelPollMs: overrides.researchCancelPollMs } : {}),
  });
  const dispatcher: ResearchDispatcher = config.redisUrl
    ? await createQueueDispatcher({
        redisUrl: config.redisUrl,
        // The research database's cluster: daemons sharing it share the queue, others never take its jobs.
        clusterId: await researchSql.clusterId(),
        // BullMQ's own bull:research-runs for a single install, the cluster's prefix in cluster mode (docs/operations.md#research-queue-name).
        queuePrefix: config.researchQueuePrefix ?? (config.databaseUrl !== undefined ? 'cluster' : 'bull'),
        store: runStore,
        executor,
        log,
        concurrency: config.researchWorkerConcurrency,
        ...(config.researchLockMs !== undefined ? { lockDurationMs: config.researchLockMs } : {}),
        ...(config.researchStalledMs !== undefined ? { stalledIntervalMs: config.researchStalledMs } : {}),
        // A PostgreSQL research database: runs hold leases, so the reconciler may re-add running runs too.
        ...(pgStore !== undefined ? { leases: createPgLeases(pgStore.db, log) } : {}),
        reconcileIntervalMs: config.queueReconcileMs,
        reconcileGraceMs: Math.min(config.queueReconcileMs, 10_000),
        ...overrides.researchQueue,
      })
    : createDirectResearchDispatcher(executor);
  const service = new ResearchService(runStore, dispatcher, log);
  // Active research runs are aborted: a queued job is retried by another daemon, a direct run fails.
  life.defer('stopping research runs', () => service.close().catch((err: unknown) => log.warn({ err }, 'research shutdown failed')));
  // Direct runs execute inside a request of this process: with the daemon's own research
  // database, a run left queued or running can only belong to a previous process that died,
  // and nothing will ever finish it. (With Redis, BullMQ retries it; with a shared
  // --research-db, another daemon may own it, so nothing is touched.)
  if (dispatcher.mode === 'direct' && config.researchDb === undefined && config.databaseUrl === undefined && config.researchStore === 'sqlite') {
    const orphans = await runStore.failUnfinished(RESEARCH_RESTART_MESSAGE);
    if (orphans.length > 0) log.warn({ runs: orphans }, 'research runs interrupted by a restart were marked failed');
  }
  log.info({ mode: dispatcher.mode, store: config.researchStore, file: dbFile, userAgent: crawler.userAgent }, 'research runs ready');
  return { service, keys: researchSql, dbFile };
}
