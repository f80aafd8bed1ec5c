/**
 * Composition root: config → logger → adapters → daemon. The only place (with `cli/`) that
 * builds concrete adapters, reads the environment, installs signal handlers or exits.
 */
import { chmodSync, existsSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Server } from 'node:http';
import { createLogger, type Logger } from './log.js';
import { FusionError } from './errors.js';
import { DaemonConfigSchema, type DaemonConfig, type DaemonConfigInput } from './contracts/config.js';
import { openSqliteStore } from './store/sqlite-store.js';
import { openPgStore, openResearchPgStore, type PgStore } from './store/pg-store.js';
import { createPgSignals } from './store/pg-signals.js';
import { createPgLeases } from './store/pg-leases.js';
import { createTaskQueue } from './tasks/queue-dispatch.js';
import type { ClusterSignals, TaskQueue } from './tasks/cluster-port.js';
import { hostname } from 'node:os';
import type { Store } from './store/port.js';
import { TaskEventBus } from './tasks/event-bus.js';
import { createDirectDispatcher } from './tasks/dispatcher.js';
import { TaskService, type RepoBundles } from './tasks/task-service.js';
import type { TaskRunner } from './tasks/runner-port.js';
import { dataPaths } from './tasks/paths.js';
import { createBundleCache } from './bundles/bundle-cache.js';
import { packRepo } from './bundles/pack-as-caller.js';
import { pruneRepoSnapshots } from './bundles/snapshot-retention.js';
import { createApiHandler, type ApiContext } from './api/routes.js';
import { MAX_CONNECTIONS_PER_CALLER, assertNoLiveDaemon, closeServer, listenOnSocket, type SocketListenOptions } from './api/socket-server.js';
import { prepareGroupSocketDir, resolveSocketGroup } from './api/socket-group.js';
import { loadPeerCredReader } from './api/peer-cred.js';
import { checkRepoAsCaller } from './tasks/repo-access.js';
import { isPrivileged } from './tasks/caller.js';
import { assertDataDirOwned } from './store/data-dir-owner.js';
import { createDockerLauncher } from './launcher/docker.js';
import { childImage } from './launcher/docker-config.js';
import { createDaemonUidPool } from './launcher/daemon-uid-pool.js';
import { createGuardedFetch, toBrokerFetcher } from './egress/guarded-fetch.js';
import { parseResolveList } from './egress/resolve-list.js';
import { createLauncherFactories } from './launcher/factories.js';
import { selectLauncher, type LauncherFactories } from './launcher/select.js';
import { DEFAULT_SANDBOX_LIMITS, type Launcher, type LauncherName } from './launcher/port.js';
import { createFusionWorkflow } from './workflow/fusion-workflow.js';
import { createStageWorkerPool } from './workflow/stage-workers.js';
import { claimRunRoot, prepareRunRoot, type RunRoot } from './launcher/attempt-dirs.js';
import { takeDataDirLock, type DataDirLock } from './store/data-dir-lock.js';
import { reapSandboxLeftovers } from './launcher/sandbox-reaper.js';
import type { Roster } from './models/roster.js';
import type { BudgetConfig } from './contracts/budget.js';
import { loadRosterConfig } from './models/roster-config.js';
import type { TaskOptions } from './contracts/task-options.js';
import type { WorkflowDeps } from './workflow/stage-context.js';
import { loadSigningKey, type SigningKey } from './audit/signing.js';
import { pruneSealedAttemptFiles, sealTask } from './audit/task-tarball.js';
import { cachedFreeSpaceCheck, freeBytesOrUndefined, withStorageFacts } from './tasks/free-space.js';
import { createAttemptRecordCheck, createResultSealCheck } from './audit/result-seal.js';
import { instrumentFetcher, instrumentLauncher, instrumentStageWorkers } from './instrument.js';
import { createHealthFacts, createMetricsEndpoint } from './api/metrics.js';
import { maintenanceConfig, type MaintenanceConfig } from './maintenance/config.js';
import { startMaintenance, type MaintenanceJobName, type MaintenanceScheduler } from './maintenance/scheduler.js';
import { runBackup, runOrphanReaper, runRetention, runStaleTaskSweep } from './maintenance/jobs.js';
import { createCrawler, buildResearchDocument } from './research/crawl/crawler.js';
import type { Crawler, CrawlerOptions } from './research/crawl/port.js';
import { RunExecutor, type DocumentBuilder } from './research/run-executor.js';
import { createDirectResearchDispatcher, type ResearchDispatcher } from './research/dispatch.js';
import { createQueueDispatcher, type QueueDispatchOptions } from './research/queue-dispatch.js';
import { ResearchService } from './research/research-service.js';
import { openResearchSqliteStore, type ResearchSqliteStore } from './store/research-sqlite-store.js';
import { createMemoryResearchStore } from './store/research-memory-store.js';
import { assertListenAllowed, listenOnTcp, parseListenAddress } from './api/tcp-listener.js';
import { AuthFailureThrottle, type AuthThrottleOptions } from './api/auth-throttle.js';
import { sha256Hex } from './contracts/sha256.js';
import { packageVersion } from './common/package-version.js';

/**
 * dist/ root: holds the compiled child code (bound read-only at /opt/fusion) and jobs/. When this
 * module runs from TypeScript sources (tests), the compiled tree next to them is used.
 */
export const CODE_DIR = import.meta.url.endsWith('.ts')
  ? resolve(dirname(fileURLToPath(import.meta.url)), '..', 'dist')
  : resolve(dirname(fileURLToPath(import.meta.url)), '..');


export interface DaemonOverrides {
  log?: Logger;
  /** Replace the whole workflow (tests drive the lifecycle with a stub runner). */
  runner?: TaskRunner;
  /** A fixed roster for every task (tests); otherwise the models file / flags / builtin default. */
  roster?: Roster;
  /** Environment for model keys and FUSION_MODELS_FILE (the CLI passes process.env). */
  env?: Record<string, string | undefined>;
  launcherFactories?: LauncherFactories;
  /** Extra workflow dependencies (test seams: a wrapping launcher, random bytes, limits). */
  workflow?: Partial<WorkflowDeps>;
  /** Maintenance settings over the environment's (tests use short intervals). */
  maintenance?: Partial<MaintenanceConfig>;
  /** cgroup roots the reaper searches (default /sys/fs/cgroup). */
  cgroupRoots?: string[];
  /** Test seam: builds the research crawler instead of the real one (given the daemon's guard). */
  researchCrawler?: (options: CrawlerOptions) => Crawler;
  /** Test seam: the research document builder to pair with a test crawler. */
  researchDocument?: DocumentBuilder;
  /** Test seams of the research queue (a throwing add, a short add timeout). */
  researchQueue?: Pick<QueueDispatchOptions, 'add' | 'addTimeoutMs'>;
  /** How often an active research run checks for a cancel made through another daemon. */
  researchCancelPollMs?: number;
  /** Test seam: wraps the opened store (the chaos tests stop the process at a chosen write). */
  wrapStore?: <T extends Store>(store: T) => T;
  /** Test seam: the peer-credential addon's path (a missing one proves --socket-group refuses to start). */
  peerCredAddon?: string;
  /** Test seam: the TCP listener's failed-authentication limit (default 20 per address per minute). */
  tcpAuthThrottle?: Partial<AuthThrottleOptions>;
}

export interface Daemon {
  config: DaemonConfig;
  tasks: TaskService;
  store: Store;
  research: ResearchService;
  /** The research store's SQLite file (runs unless --research-store memory, and API keys). */
  researchDbFile: string;
  log: Logger;
  socketPath: string;
  /** The task tarball signing key, when `fusion keys signing-init` created one. */
  signingKey: SigningKey | null;
  maintenance: MaintenanceScheduler;
  /** The TCP listener of the research API, when `listen` is configured. */
  tcp: { host: string; port: number } | null;
  close(): Promise<void>;
  /**
   * `close()` bounded by `shutdownTimeoutS` (SIGTERM/SIGINT): a stop ends in time whatever the
   * database, Redis or a sandbox do. Past the deadline it logs what it abandoned and resolves
   * with exit status 1; the abandoned runs stay non-terminal, so they resume elsewhere (expired
   * leases) or at the next start.
   */
  stop(): Promise<ShutdownReport>;
}

export interface ShutdownReport {
  /** 0 after a complete shutdown, 1 when the deadline passed first. */
  exitCode: 0 | 1;
  /** The step the shutdown was in when the deadline passed. */
  stuckAt?: string;
  /** Task runs this daemon had not stopped and handed back by the deadline, with their state when the store answered in time. */
  abandonedTasks: Array<{ taskId: string; state: string }>;
  /** Research runs still under way at the deadline. */
  abandonedResearchRuns: number;
}

export const RESEARCH_RESTART_MESSAGE = 'The daemon restarted before the research run finished.';

/** The research database file of a configuration: `researchDb`, else the data directory's store. */
export function researchDbFileOf(config: Pick<DaemonConfig, 'home' | 'researchDb'>): string {
  return config.researchDb ?? dataPaths(config.home).dbFile;
}

export function buildConfig(input: DaemonConfigInput): DaemonConfig {
  const parsed = DaemonConfigSchema.safeParse(input);
  if (!parsed.success) {
    const summary = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new FusionError('invalid_config', `configuration is invalid: ${summary}`);
  }
  return Object.freeze(parsed.data);
}

/** Creates the data directory 0700 (and tightens an existing one that is group/world accessible). */
function prepareHome(home: string, log: Logger): void {
  try {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    if (!statSync(home).isDirectory()) throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' });
  } catch (err) {
    // Name the path and the problem (a file given as --data, no permission, a read-only disk).
    const code = (err as NodeJS.ErrnoException).code;
    const problem = code === 'EEXIST' || code === 'ENOTDIR' ? 'exists and is not a directory (or a parent is a file)' : code === 'EACCES' || code === 'EPERM' ? 'cannot be created or opened: permission denied' : code === 'EROFS' ? 'is on a read-only filesystem' : `cannot be created (${code ?? (err as Error).message})`;
    throw new FusionError('invalid_config', `data directory ${home} ${problem}; choose another with --data or FUSION_HOME`, { details: { field: 'data', path: home } });
  }
  // Before it is tightened (chmod follows links) or anything in it is opened.
  assertDataDirOwned(home, process.getuid?.() ?? 0);
  const mode = statSync(home).mode & 0o777;
  if (mode !== 0o700) {
    log.warn({ home, mode: mode.toString(8) }, 'data directory was not 0700; tightening it');
    chmodSync(home, 0o700);
  }
}

/**
 * Who may connect and how each caller is known (docs/security.md#socket-callers). With a socket
 * group the kernel must name every caller: without the addon the daemon refuses to start rather
 * than trust every member alike. Without one, only the daemon's uid (and root) can connect, so
 * a caller the addon cannot read is the daemon's own uid.
 */
function withEgressSeams(config: Pick<DaemonConfig, 'egressResolve' | 'egressAllowCidrs'>, health: () => Promise<Record<string, unknown>>): () => Promise<Record<string, unknown>> {
  return async () => ({ ...(await health()), egress: { resolve: config.egressResolve, allowCidrs: config.egressAllowCidrs } });
}

function socketAccess(config: DaemonConfig, log: Logger, addonPath?: string): SocketListenOptions {
  const reader = loadPeerCredReader(addonPath);
  const uid = process.getuid?.() ?? 0;
  const self = { uid, gid: process.getgid?.() ?? 0, pid: process.pid, groups: null };
  const onIdentifyError = (err: Error): void => log.warn({ err: err.message }, 'socket connection refused: its caller could not be read (SO_PEERCRED)');
  if (config.socketGroup === undefined) {
    if ('error' in reader) log.warn({ reason: reader.error }, 'peer credentials unavailable: every socket caller is taken as the daemon\'s uid (the socket is 0600)');
    return 'read' in reader ? { identify: reader.read, onIdentifyError } : { fallbackCaller: self };
  }
  const group = resolveSocketGroup(config.socketGroup);
  if ('error' in reader) {
    throw new FusionError('invalid_config', `--socket-group ${group.name} needs the peer-credential addon to tell callers apart, and it is unavailable: ${reader.error}`, { details: { field: 'socketGroup' } });
  }
  if (uid !== 0) {
    throw new FusionError('invalid_config', `--socket-group ${group.name} needs a root daemon: it checks each caller's repository as that caller (setpriv), which needs CAP_SETUID`, { details: { field: 'socketGroup' } });
  }
  prepareGroupSocketDir(config.socketPath, group, resolve(config.home));
  log.info({ group: group.name, gid: group.gid, socket: config.socketPath }, 'socket shared with a group: its members are callers (SO_PEERCRED)');
  return { group, identify: reader.read, onIdentifyError, perCaller: { maxConnections: MAX_CONNECTIONS_PER_CALLER, unbounded: (caller) => isPrivileged(caller, uid) } };
}

export async function startDaemon(config: DaemonConfig, overrides: DaemonOverrides = {}): Promise<Daemon> {
  const log = overrides.log ?? createLogger({ level: config.logLevel });
  prepareHome(config.home, log);
  // One owner per data directory, taken before anything it owns is looked at: a second daemon
  // would otherwise reap the first one's containers and recover its running tasks as orphans.
  const lock = await takeDataDirLock(config.home, { socket: config.socketPath });
  let runRoot: RunRoot | undefined;
  try {
    // Per-attempt staging (docs/security.md#threat-local-users): fresh at each start; what dead
    // runs of this data directory left is removed now that no live daemon can be using it.
    const override = overrides.workflow?.runRoot;
    if (override !== undefined) prepareRunRoot(override);
    runRoot = override !== undefined ? { path: override, remove: () => rmSync(override, { recursive: true, force: true }) } : claimRunRoot(config.home);
    const owned = { lock, runRoot };
    return await startOwned(config, overrides, log, owned);
  } catch (err) {
    runRoot?.remove();
    await lock.release();
    throw err;
  }
}

/** The daemon's start-up once it owns its data directory and run root (given back by `close`). */
async function startOwned(config: DaemonConfig, overrides: DaemonOverrides, log: Logger, owned: { lock: DataDirLock; runRoot: RunRoot }): Promise<Daemon> {
  const runRoot = owned.runRoot.path;
  // Before anything is created: a bad --socket-group is a start-up error naming the flag.
  const access = socketAccess(config, log, overrides.peerCredAddon);
  const paths = dataPaths(config.home);
  mkdirSync(paths.tasksDir, { recursive: true, mode: 0o700 });
  // Before anything shared is touched: refuse to run beside a live daemon on the same socket.
  await assertNoLiveDaemon(config.socketPath);
  // A signing key readable by others is a start-up error, not a silent unsigned run.
  const signingKey = loadSigningKey(config.home);
  // Cluster mode: the shared PostgreSQL database; otherwise the data directory's SQLite file.
  const pgStore: PgStore | undefined = config.databaseUrl !== undefined ? await openPgStore({ url: config.databaseUrl, log }) : undefined;
  const opened = pgStore ?? await openSqliteStore({ file: paths.dbFile, log });
  const store = overrides.wrapStore ? overrides.wrapStore(opened) : opened;
  const bus = new TaskEventBus();
  const dispatcher = createDirectDispatcher(config.taskConcurrency);
  const isRoot = process.getuid?.() === 0;
  // One uid per sandbox from the configured range (root only: changing uid needs privileges).
  const uidPool = createDaemonUidPool(config.sandboxUids, isRoot, log);
  // What "a sandbox uid" may read, for the host-side checks that must not see more than a
  // sandbox could (any uid of the range stands for all of them: none owns anything).
  const sandboxOwner = isRoot ? { uid: uidPool.range.start, gid: uidPool.range.start } : null;

  // Containers of this daemon carry an owner label derived from its home, so start-up reaping
  // removes only this daemon's orphans (never another daemon's or `sandbox exec`'s).
  const dockerOwner = `daemon-${sha256Hex(config.home).slice(0, 12)}`;
  const factories: LauncherFactories =
    overrides.launcherFactories ?? createLauncherFactories({ log, uidPool, dockerOwner, allowRlimitFallback: config.sandboxRlimitFallback });
  const launchers = new Map<string, Promise<Launcher>>();
  const launcherFor = (choice: 'auto' | LauncherName): Promise<Launcher> => {
    const key = choice === 'auto' ? config.sandbox : choice;
    let p = launchers.get(key);
    if (!p) {
      p = selectLauncher(key, factories).then(instrumentLauncher);
      // A failed probe is not cached: the admin may install the backend and retry.
      p.catch(() => launchers.delete(key));
      launchers.set(key, p);
    }
    return p;
  };

  // Models: fatal at start-up when the file, a flag or a key is wrong (never silently defaulted).
  const rosterSource = loadRosterConfig({
    ...(config.modelsFile ? { file: config.modelsFile } : {}),
    env: overrides.env ?? {},
    log,
    adminOverrides: {
      ...(config.candidateModels.length > 0 ? { candidate: config.candidateModels } : {}),
      ...(config.evaluatorModel ? { evaluator: config.evaluatorModel } : {}),
      ...(config.mergerModel ? { merger: config.mergerModel } : {}),
    },
  });
  const fixed = overrides.roster;
  const rosterFor = (options: TaskOptions): { roster: Roster; describe(): unknown; budget?: BudgetConfig } =>
    fixed ? { roster: fixed, describe: () => ({ source: 'fixed roster (test seam)' }) } : rosterSource.build(options.models);
  log.info({ models: rosterSource.describe() }, 'model roster loaded');

  // The egress guard for research fetches; its admin seams are announced loudly by the guard.
  let guardedFetch: ReturnType<typeof createGuardedFetch>;
  try {
    guardedFetch = createGuardedFetch({
      log,
      resolveOverrides: parseResolveList(config.egressResolve, 'egressResolve'),
      allowCidrs: config.egressAllowCidrs,
    });
  } catch (err) {
    await store.close();
    throw new FusionError('invalid_config', `egress configuration is invalid: ${(err as Error).message}`, { cause: err });
  }

  // Research runs: keys always in SQLite (the `fusion keys` commands write them there); runs in
  // SQLite too unless the admin asked for the in-memory mode.
  const listenAddress = config.listen === undefined ? undefined : parseListenAddress(config.listen);
  if (listenAddress) assertListenAllowed(listenAddress, config.listenPublic);
  const researchDbFile = config.databaseUrl !== undefined ? opened.file : researchDbFileOf(config);
  let researchSql: ResearchSqliteStore;
  let research: ResearchService;
  try {
    researchSql = config.databaseUrl !== undefined
      ? await openResearchPgStore({ url: config.databaseUrl, log })
      : await openResearchSqliteStore({ file: researchDbFile, log });
  } catch (err) {
    await guardedFetch.close();
    await store.close();
    throw err;
  }
  try {
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
    research = new ResearchService(runStore, dispatcher, log);
    // Direct runs execute inside a request of this process: with the daemon's own research
    // database, a run left queued or running can only belong to a previous process that died,
    // and nothing will ever finish it. (With Redis, BullMQ retries it; with a shared
    // --research-db, another daemon may own it, so nothing is touched.)
    if (dispatcher.mode === 'direct' && config.researchDb === undefined && config.databaseUrl === undefined && config.researchStore === 'sqlite') {
      const orphans = await runStore.failUnfinished(RESEARCH_RESTART_MESSAGE);
      if (orphans.length > 0) log.warn({ runs: orphans }, 'research runs interrupted by a restart were marked failed');
    }
    log.info({ mode: dispatcher.mode, store: config.researchStore, file: researchDbFile, userAgent: crawler.userAgent }, 'research runs ready');
  } catch (err) {
    await researchSql.close().catch(() => undefined);
    await guardedFetch.close();
    await store.close();
    throw err;
  }

  const stageWorkers = instrumentStageWorkers(createStageWorkerPool({ jobFile: join(CODE_DIR, 'jobs', 'stage-worker.js'), log }));
  const runner =
    overrides.runner ??
    createFusionWorkflow({
      log,
      tasksDir: paths.tasksDir,
      runRoot,
      codeDir: CODE_DIR,
      stageJobFile: join(CODE_DIR, 'jobs', 'stage-worker.js'),
      launcherFor,
      rosterFor,
      fetcher: instrumentFetcher(toBrokerFetcher(guardedFetch)),
      stageWorkers,
      sandboxOwner,
      sandboxLimits: DEFAULT_SANDBOX_LIMITS,
      // A shared database: attempts are kept there, so any daemon can seal any task.
      archiveAttempts: pgStore !== undefined,
      ...overrides.workflow,
    });

  // No container of this daemon can be live before recovery: reap them before resumed tasks
  // launch new ones, whatever the backend now (a daemon restarted with bwrap still owns the
  // containers its killed predecessor left).
  const docker = !overrides.launcherFactories && existsSync('/var/run/docker.sock')
    ? createDockerLauncher({ log, uidPool, owner: dockerOwner })
    : undefined;
  if (docker !== undefined) {
    await docker.reapOrphans(new Set()).catch((err: unknown) => log.warn({ reason: (err as Error).message }, 'orphan container reaping failed'));
  }
  // Then what a killed predecessor's sandboxes left: stray processes of the uid pool, mounts,
  // mount points, and the uid claims nothing holds any more (src/launcher/sandbox-reaper.ts).
  await reapSandboxLeftovers({ log, runRoot, pool: uidPool }).catch((err: unknown) => log.warn({ reason: (err as Error).message }, 'sandbox leftover reaping failed'));
  const sealDeps = {
    store,
    tasksDir: paths.tasksDir,
    signingKey,
    describeModels: (t: { options: string }) => {
      try {
        return rosterFor(JSON.parse(t.options) as TaskOptions).describe();
      } catch (err) {
        return { error: (err as Error).message };
      }
    },
    log,
  };
  if (signingKey) log.info({ publicKeySha256: signingKey.publicKeySha256 }, 'task tarballs are signed (Ed25519)');
  else log.warn({ home: config.home }, 'no signing key: task tarballs are sealed unsigned (fusion keys signing-init creates one)');

  // Cluster mode: PostgreSQL and Redis shared by every daemon; tasks go through the shared queue.
  let cluster: { queue: TaskQueue; signals: ClusterSignals; daemonId: string } | undefined;
  // Repository snapshots (docs/operations.md#repository-snapshots): every task runs over a
  // root-owned tree packed as its caller; in cluster mode the tree comes from the store.
  const clustered = pgStore !== undefined && config.redisUrl !== undefined;
  const snapshotCache = await createBundleCache({ dir: paths.bundlesDir, ...(clustered ? { store } : {}), maxBytes: config.bundleMaxBytes, log: log.child({ component: 'bundles' }) });
  const bundles: RepoBundles = {
    pack: packRepo, checkout: (digest) => snapshotCache.checkout(digest), maxBytes: config.bundleMaxBytes, pin: (digest) => snapshotCache.pin(digest),
    ...(clustered ? {} : { install: (b: { digest: string; data: Buffer }) => snapshotCache.install(b) }),
  };
  if (pgStore !== undefined && config.redisUrl !== undefined) {
    const daemonId = config.daemonId ?? `${hostname()}-${process.pid}`;
    const queue = await createTaskQueue({
      redisUrl: config.redisUrl, clusterId: await pgStore.clusterId(), log, concurrency: config.taskConcurrency,
      ...(config.taskLeaseMs !== undefined ? { lockDurationMs: config.taskLeaseMs } : {}),
      ...(config.taskStalledCheckMs !== undefined ? { stalledIntervalMs: config.taskStalledCheckMs } : {}),
      // Redis may lose jobs: runs hold database leases, and the reconciler re-adds lost jobs.
      leases: createPgLeases(pgStore.db, log),
      unfinished: () => store.listNonTerminalTasks(),
      reconcileIntervalMs: config.queueReconcileMs,
      reconcileGraceMs: Math.min(config.queueReconcileMs, 10_000),
    });
    cluster = { queue, signals: await createPgSignals(pgStore.db, log), daemonId };
    log.info({ daemonId, concurrency: config.taskConcurrency }, 'cluster mode: tasks run through the shared queue');
  } else if (pgStore !== undefined) {
    log.warn({}, 'PostgreSQL store without REDIS_URL: this daemon runs its own tasks only (set REDIS_URL to share work between daemons)');
  }

  const tasks = new TaskService({
    store,
    bus,
    dispatcher,
    runner,
    log,
    tasksDir: paths.tasksDir,
    // A bad model override is an input error at submit time, before anything exists.
    preflightOptions: (options) => rosterFor(options).budget,
    onTerminal: async (taskId) => {
      const sealed = await sealTask(sealDeps, taskId);
      // Each attempt kept once: the sealed tarball, not also the unpacked files (unless asked).
      if (sealed !== null && !config.keepAttemptFiles) {
        await pruneSealedAttemptFiles(paths.tasksDir, taskId);
        await store.dropSealedCheckpoints(taskId);
      }
    },
    admission: { maxQueued: config.maxQueuedTasks, maxQueuedPerCaller: config.maxQueuedPerCaller, concurrency: config.taskConcurrency },
    assertStorage: cachedFreeSpaceCheck(config.home, config.storageReserveBytes),
    checkRepo: checkRepoAsCaller,
    ...(cluster !== undefined ? { cluster } : {}),
    bundles,
  });
  // On a full disk the daemon starts read-only (issue 16): status and results are served;
  // nothing is accepted, resumed or sealed until space is freed and the daemon restarted, so
  // an interrupted task is not failed for want of a write (it resumes at the next start).
  const startFree = freeBytesOrUndefined(config.home);
  const readOnly = startFree !== undefined && startFree < config.storageReserveBytes;
  if (readOnly) {
    log.warn(
      { home: config.home, freeBytes: startFree, reserveBytes: config.storageReserveBytes },
      'the disk holding the data directory is full: starting read-only (status and results are readable; no task is accepted or resumed until space is freed and the daemon restarted)',
    );
    tasks.setReadOnly(`the daemon started read-only because the disk holding ${config.home} was full; free space and restart it`);
  } else if (cluster !== undefined) {
    // Cluster mode: a dead daemon's tasks come back through the queue (their leases expire); here
    // only tasks that never got a job are queued again. Nothing is resumed from this list, since
    // other daemons run some of those tasks right now.
    await cluster.signals.subscribe({ events: (id) => tasks.remoteEvents(id), cancel: (id) => tasks.remoteCancel(id) });
    const requeued = await tasks.requeueUnfinished();
    if (requeued > 0) log.info({ unfinished: requeued }, 'cluster: unfinished tasks have their queue jobs');
    await cluster.queue.start((job) => tasks.runQueued(job));
    const resealed = await tasks.sealUnsealed();
    if (resealed.length > 0) log.warn({ tasks: resealed }, 'sealed terminal tasks a stopped daemon had left unsealed');
  } else {
    const recovered = await tasks.recover();
    if (recovered.resumed.length + recovered.failed.length > 0) log.warn(recovered, 'restart recovery');
    const resealed = await tasks.sealUnsealed();
    if (resealed.length > 0) log.warn({ tasks: resealed }, 'sealed terminal tasks a stopped daemon had left unsealed');
  }

  const CLUSTER_SKIP = { skipped: 'cluster mode: a dead daemon\'s tasks return through the queue when their leases expire' };
  const PG_BACKUP_SKIP = { skipped: 'the PostgreSQL store is backed up with PostgreSQL\'s own tools (pg_dump)' };
  const READ_ONLY_SKIP = { skipped: 'the daemon started read-only (full disk); restart it once space is freed' };
  const maint = maintenanceConfig(config.home, overrides.env ?? {}, overrides.maintenance);
  // Read-only: nothing is backed up, and a new directory on the full disk could fail the start.
  if (!readOnly) mkdirSync(maint.backupDir, { recursive: true, mode: 0o700 });
  const running = (): Set<string> => tasks.runningTaskIds();
  const maintenance = await startMaintenance({
    jobFile: join(CODE_DIR, 'jobs', 'maintenance-tick.js'),
    log,
    jobs: [
      {
        name: 'retention', intervalMs: maint.retentionIntervalMs,
        run: async () => ({
          ...(await runRetention({ store, tasksDir: paths.tasksDir, olderThanDays: maint.retentionDays, running, log })),
          snapshots: await pruneRepoSnapshots({ store, cache: snapshotCache, olderThanDays: maint.retentionDays, log }),
        }),
      },
      {
        name: 'reaper',
        intervalMs: maint.reaperIntervalMs,
        run: () => runOrphanReaper({
          ...(docker ? { reapContainers: (live: Set<string>) => docker.reapOrphans(live) } : {}),
          running, tmpDir: tmpdir(), runRoot, staleAfterMs: maint.reaperStaleAfterMs,
          cgroupRoots: overrides.cgroupRoots ?? ['/sys/fs/cgroup'], log,
        }),
      },
      // Read-only (full disk at start): interrupted tasks wait for the next start, so the sweep
      // must not fail them; and a database copy must not be written onto the full disk.
      // Cluster mode: another daemon may run a task this one does not; expired leases bring them back instead.
      { name: 'stale-sweep', intervalMs: maint.staleSweepIntervalMs, run: () => (readOnly ? Promise.resolve(READ_ONLY_SKIP) : cluster !== undefined ? Promise.resolve(CLUSTER_SKIP) : runStaleTaskSweep({ store, running, fail: (id, err) => tasks.fail(id, err), staleAfterMs: maint.staleTaskAfterMs, log })) },
      { name: 'backup', intervalMs: maint.backupIntervalMs, run: () => (readOnly ? Promise.resolve(READ_ONLY_SKIP) : pgStore !== undefined ? Promise.resolve(PG_BACKUP_SKIP) : runBackup({
        store, dir: maint.backupDir, keep: maint.backupKeep, log, home: config.home, tasksDir: paths.tasksDir, running, signingKey: maint.backupSigningKey,
        // The research tables are in the main database unless --research-db named another file.
        ...(config.researchDb !== undefined && researchSql.backupTo ? { research: { backupTo: (f: string) => researchSql.backupTo!(f) } } : {}),
      })) },
    ],
  });

  const startedAt = new Date().toISOString();
  const apiContext: ApiContext = {
    tasks,
    log,
    version: packageVersion(),
    startedAt,
    sandbox: async () => {
      try {
        const l = await launcherFor('auto');
        return { backend: l.name, ok: true };
      } catch (err) {
        return { ok: false, reason: (err as Error).message };
      }
    },
    // The owner's full health names the admin egress seams: `fusion mcp` compares its own with them (research_run).
    health: withEgressSeams(config, withStorageFacts(config.home, config.storageReserveBytes, readOnly, createHealthFacts({
      database: () => opened.databaseFacts(),
      providers: () => rosterSource.describe(),
      // Cluster mode: this daemon's runs (the waiting tasks are in the shared queue, not here).
      queue: () => (cluster !== undefined ? { queued: 0, running: cluster.queue.running } : { queued: dispatcher.queued, running: dispatcher.running }),
      image: (backend) => (backend === 'docker' ? childImage() : null),
      sandboxBackend: async () => (await launcherFor('auto').catch(() => undefined))?.name,
    }))),
    metrics: createMetricsEndpoint(store),
    runMaintenance: (job) => {
      if (!['retention', 'reaper', 'stale-sweep', 'backup'].includes(job)) {
        return Promise.reject(new FusionError('not_found', `no maintenance job ${JSON.stringify(job)}; use retention, reaper, stale-sweep or backup`));
      }
      return maintenance.runNow(job as MaintenanceJobName);
    },
    ...(signingKey ? { resultSeal: createResultSealCheck(store, signingKey.publicKey) } : {}),
    attemptCheck: createAttemptRecordCheck(store),
    research: { service: research, keys: researchSql },
    tcpAuthThrottle: new AuthFailureThrottle(overrides.tcpAuthThrottle),
  };
  let server: Server;
  let tcp: { server: Server; host: string; port: number } | undefined;
  try {
    server = await listenOnSocket(config.socketPath, createApiHandler(apiContext, 'socket'), access);
    if (listenAddress) {
      try {
        tcp = await listenOnTcp(listenAddress, createApiHandler(apiContext, 'tcp'));
      } catch (err) {
        await closeServer(server, config.socketPath);
        throw err;
      }
    }
  } catch (err) {
    await maintenance.stop();
    await research.close().catch(() => undefined);
    await tasks.shutdown();
    await researchSql.close().catch(() => undefined);
    await store.close();
    throw err;
  }
  log.info({ socket: config.socketPath, home: config.home, pid: process.pid }, 'fusion daemon listening');
  if (tcp) log.info({ host: tcp.host, port: tcp.port }, 'research API listening on TCP (only /api/v1/research and /v1/health)');

  let closing: Promise<void> | undefined;
  let closeStep = 'not started';
  const step = async (name: string, work: () => Promise<unknown> | unknown): Promise<void> => {
    closeStep = name;
    await work();
  };
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      log.info({}, 'fusion daemon shutting down');
      await step('closing the listeners', async () => {
        if (tcp) await closeServer(tcp.server);
        await closeServer(server, config.socketPath);
      });
      await step('stopping maintenance', () => maintenance.stop());
      // Active research runs are aborted: a queued job is retried by another daemon, a direct run fails.
      await step('stopping research runs', () => research.close().catch((err: unknown) => log.warn({ err }, 'research shutdown failed')));
      await step('stopping task runs', () => tasks.shutdown());
      tasksStopped = true;
      await step('stopping stage workers', () => stageWorkers.stop());
      await step('closing egress', () => guardedFetch.close());
      await step('closing the research store', () => researchSql.close());
      await step('closing cluster signals', () => cluster?.signals.close());
      await step('closing the store', () => store.close());
      // Last: nothing of this run is left in the run root, and the data directory is free.
      await step('releasing the data directory', async () => {
        owned.runRoot.remove();
        await owned.lock.release();
      });
      closeStep = 'done';
    })());
  let tasksStopped = false;
  /**
   * The task runs whose stop had not finished by the deadline (a run that was aborted but whose
   * job could not be handed back counts too), each with its state if the store answers within a second.
   */
  const abandonedTasks = async (atStop: readonly string[]): Promise<Array<{ taskId: string; state: string }>> => {
    const ids = tasksStopped ? [] : [...new Set([...atStop, ...tasks.runningTaskIds()])];
    const unknown = 'unknown (the store did not answer)';
    return Promise.all(ids.map(async (taskId) => {
      let timer: NodeJS.Timeout | undefined;
      const state = await Promise.race([
        store.getTask(taskId).then((t) => t?.state ?? unknown, () => unknown),
        new Promise<string>((r) => {
          timer = setTimeout(() => r(unknown), 1000);
        }),
      ]);
      clearTimeout(timer);
      return { taskId, state };
    }));
  };
  const stop = async (): Promise<ShutdownReport> => {
    const deadlineMs = config.shutdownTimeoutS * 1000;
    const atStop = [...tasks.runningTaskIds()];
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      close().then(() => false, (err: unknown) => {
        log.error({ err, step: closeStep }, 'shutdown step failed');
        return false;
      }),
      new Promise<true>((r) => {
        timer = setTimeout(() => r(true), deadlineMs);
      }),
    ]);
    clearTimeout(timer);
    if (!timedOut) return { exitCode: 0, abandonedTasks: [], abandonedResearchRuns: 0 };
    const report: ShutdownReport = { exitCode: 1, stuckAt: closeStep, abandonedTasks: await abandonedTasks(atStop), abandonedResearchRuns: research.activeRuns() };
    log.error(
      { deadlineS: config.shutdownTimeoutS, stuckAt: report.stuckAt, abandoned: report.abandonedTasks, abandonedResearchRuns: report.abandonedResearchRuns },
      'shutdown deadline passed: exiting with work abandoned (abandoned tasks stay unfinished and resume on another daemon once their leases expire, or at the next start)',
    );
    return report;
  };
  return {
    config,
    tasks,
    store,
    research,
    researchDbFile,
    log,
    socketPath: config.socketPath,
    signingKey,
    maintenance,
    tcp: tcp ? { host: tcp.host, port: tcp.port } : null,
    close,
    stop,
  };
}
