/**
 * The maintenance jobs Bree schedules (retention, the orphan reaper, the stale-task sweep, the
 * backup), each skipped with a reason where it must not run (read-only start, cluster mode, a
 * PostgreSQL store).
 */
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '../log.js';
import type { DaemonConfig } from '../contracts/config.js';
import type { Store } from '../store/port.js';
import type { PgStore } from '../store/pg-store.js';
import type { ResearchSqliteStore } from '../store/research-sqlite-store.js';
import type { TaskService } from '../tasks/task-service.js';
import { dataPaths } from '../tasks/paths.js';
import type { BundleCache } from '../bundles/bundle-cache.js';
import { pruneRepoSnapshots } from '../bundles/snapshot-retention.js';
import type { createDockerLauncher } from '../launcher/docker.js';
import { maintenanceConfig } from '../maintenance/config.js';
import { startMaintenance, type MaintenanceScheduler } from '../maintenance/scheduler.js';
import { runBackup, runOrphanReaper, runRetention, runStaleTaskSweep } from '../maintenance/jobs.js';
import { countMaintenanceRun } from '../instrument.js';
import type { DaemonOverrides } from './types.js';
import type { Lifecycle } from './lifecycle.js';
import type { Cluster } from './cluster.js';

const CLUSTER_SKIP = { skipped: 'cluster mode: a dead daemon\'s tasks return through the queue when their leases expire' };
const PG_BACKUP_SKIP = { skipped: 'the PostgreSQL store is backed up with PostgreSQL\'s own tools (pg_dump)' };
const READ_ONLY_SKIP = { skipped: 'the daemon started read-only (full disk); restart it once space is freed' };

export interface SchedulerInputs {
  config: DaemonConfig;
  overrides: Pick<DaemonOverrides, 'env' | 'maintenance' | 'cgroupRoots'>;
  log: Logger;
  codeDir: string;
  runRoot: string;
  store: Store;
  pgStore: PgStore | undefined;
  researchKeys: ResearchSqliteStore;
  tasks: TaskService;
  cluster: Cluster | undefined;
  snapshotCache: BundleCache;
  docker: ReturnType<typeof createDockerLauncher> | undefined;
  readOnly: boolean;
}

export async function startSchedulers(inputs: SchedulerInputs, life: Lifecycle): Promise<MaintenanceScheduler> {
  const { config, overrides, log, codeDir, runRoot, store, pgStore, researchKeys, tasks, cluster, snapshotCache, docker, readOnly } = inputs;
  const tasksDir = dataPaths(config.home).tasksDir;
  const maint = maintenanceConfig(config.home, overrides.env ?? {}, overrides.maintenance);
  // Read-only: nothing is backed up, and a new directory on the full disk could fail the start.
  if (!readOnly) mkdirSync(maint.backupDir, { recursive: true, mode: 0o700 });
  const running = (): Set<string> => tasks.runningTaskIds();
  const maintenance = await startMaintenance({
    jobFile: join(codeDir, 'jobs', 'maintenance-tick.js'),
    log,
    onRun: countMaintenanceRun,
    jobs: [
      {
        name: 'retention', intervalMs: maint.retentionIntervalMs,
        run: async () => ({
          ...(await runRetention({ store, tasksDir, olderThanDays: maint.retentionDays, running, log })),
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
        store, dir: maint.backupDir, keep: maint.backupKeep, log, home: config.home, tasksDir, running, signingKey: maint.backupSigningKey,
        // The research tables are in the main database unless --research-db named another file.
        ...(config.researchDb !== undefined && researchKeys.backupTo ? { research: { backupTo: (f: string) => researchKeys.backupTo!(f) } } : {}),
      })) },
    ],
  });
  life.defer('stopping maintenance', () => maintenance.stop());
  return maintenance;
}
