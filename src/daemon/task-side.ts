/**
 * The task side of the daemon: the stage worker pool, the workflow, the repository snapshots,
 * cluster mode and the task service over them. Sealing a terminal task's tarball is its
 * terminal hook.
 */
import { join } from 'node:path';
import type { Logger } from '../log.js';
import type { DaemonConfig } from '../contracts/config.js';
import type { TaskOptions } from '../contracts/task-options.js';
import type { PgStore } from '../store/pg-store.js';
import type { Store } from '../store/port.js';
import { TaskEventBus } from '../tasks/event-bus.js';
import { createDirectDispatcher, type Dispatcher } from '../tasks/dispatcher.js';
import { TaskService, type RepoBundles } from '../tasks/task-service.js';
import { dataPaths } from '../tasks/paths.js';
import { cachedFreeSpaceCheck } from '../tasks/free-space.js';
import { checkRepoAsCaller } from '../tasks/repo-access.js';
import { createBundleCache, type BundleCache } from '../bundles/bundle-cache.js';
import { packRepo } from '../bundles/pack-as-caller.js';
import type { SigningKey } from '../audit/signing.js';
import { pruneSealedAttemptFiles, sealTask } from '../audit/task-tarball.js';
import { DEFAULT_SANDBOX_LIMITS } from '../launcher/port.js';
import { createFusionWorkflow } from '../workflow/fusion-workflow.js';
import { startStageScheduler } from '../workflow/stage-workers.js';
import { countSealedTarball, instrumentFetcher, instrumentStageWorkers, replayMetrics } from '../instrument.js';
import { toBrokerFetcher } from '../egress/guarded-fetch.js';
import type { DaemonOverrides } from './types.js';
import type { Lifecycle } from './lifecycle.js';
import type { Sandboxes } from './sandboxes.js';
import type { RosterFor } from './roster.js';
import type { GuardedFetch } from './research.js';
import { joinCluster, type Cluster } from './cluster.js';

export interface TaskSideInputs {
  config: DaemonConfig;
  overrides: DaemonOverrides;
  log: Logger;
  /** dist/ root: the compiled child code and jobs/. */
  codeDir: string;
  runRoot: string;
  store: Store;
  pgStore: PgStore | undefined;
  signingKey: SigningKey | null;
  sandboxes: Sandboxes;
  rosterFor: RosterFor;
  guardedFetch: GuardedFetch;
}

export interface TaskSide {
  tasks: TaskService;
  /** This daemon's run slots (single host). */
  dispatcher: Dispatcher;
  cluster: Cluster | undefined;
  snapshotCache: BundleCache;
}

export async function startTaskSide(inputs: TaskSideInputs, life: Lifecycle): Promise<TaskSide> {
  const { config, overrides, log, codeDir, runRoot, store, pgStore, signingKey, sandboxes, rosterFor, guardedFetch } = inputs;
  const paths = dataPaths(config.home);
  const stageJobFile = join(codeDir, 'jobs', 'stage-worker.js');
  // One lane per run slot: a task runs one no-tool stage at a time, so no stage waits for a lane.
  const stageWorkers = instrumentStageWorkers(await startStageScheduler({ jobFile: stageJobFile, log, lanes: config.taskConcurrency }));
  life.defer('stopping stage workers', () => stageWorkers.stop());
  const runner =
    overrides.runner ??
    createFusionWorkflow({
      log,
      tasksDir: paths.tasksDir,
      runRoot,
      codeDir,
      stageJobFile,
      launcherFor: sandboxes.launcherFor,
      rosterFor,
      fetcher: instrumentFetcher(toBrokerFetcher(guardedFetch)),
      stageWorkers,
      replayMetrics,
      sandboxOwner: sandboxes.sandboxOwner,
      sandboxLimits: DEFAULT_SANDBOX_LIMITS,
      // A shared database: attempts are kept there, so any daemon can seal any task.
      archiveAttempts: pgStore !== undefined,
      ...overrides.workflow,
    });

  const sealDeps = {
    store,
    tasksDir: paths.tasksDir,
    signingKey,
    describeModels: (t: { options: TaskOptions }) => {
      try {
        return rosterFor(t.options).describe();
      } catch (err) {
        return { error: (err as Error).message };
      }
    },
    log,
    onSealed: countSealedTarball,
  };
  if (signingKey) log.info({ publicKeySha256: signingKey.publicKeySha256 }, 'task tarballs are signed (Ed25519)');
  else log.warn({ home: config.home }, 'no signing key: task tarballs are sealed unsigned (fusion keys signing-init creates one)');

  // Repository snapshots (docs/operations.md#repository-snapshots): every task runs over a
  // root-owned tree packed as its caller; in cluster mode the tree comes from the store.
  const clustered = pgStore !== undefined && config.redisUrl !== undefined;
  const snapshotCache = await createBundleCache({ dir: paths.bundlesDir, ...(clustered ? { store } : {}), maxBytes: config.bundleMaxBytes, log: log.child({ component: 'bundles' }) });
  const bundles: RepoBundles = {
    pack: packRepo, checkout: (digest) => snapshotCache.checkout(digest), maxBytes: config.bundleMaxBytes, pin: (digest) => snapshotCache.pin(digest),
    ...(clustered ? {} : { install: (b: { digest: string; data: Buffer }) => snapshotCache.install(b) }),
  };
  const cluster = await joinCluster(config, pgStore, store, log, life);

  const dispatcher = createDirectDispatcher(config.taskConcurrency);
  const tasks = new TaskService({
    store,
    bus: new TaskEventBus(),
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
  return { tasks, dispatcher, cluster, snapshotCache };
}
