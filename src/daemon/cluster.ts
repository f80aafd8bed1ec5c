/**
 * Cluster mode (docs/operations.md#cluster-mode): PostgreSQL and Redis shared by every daemon;
 * tasks go through the shared queue, and signals carry new events and cancels between daemons.
 */
import { hostname } from 'node:os';
import type { Logger } from '../log.js';
import type { DaemonConfig } from '../contracts/config.js';
import type { PgStore } from '../store/pg-store.js';
import { createPgSignals } from '../store/pg-signals.js';
import { createPgLeases } from '../store/pg-leases.js';
import type { Store } from '../store/port.js';
import { createTaskQueue } from '../tasks/queue-dispatch.js';
import type { ClusterSignals, TaskQueue } from '../tasks/cluster-port.js';
import type { Lifecycle } from './lifecycle.js';

export interface Cluster {
  queue: TaskQueue;
  signals: ClusterSignals;
  daemonId: string;
}

/** The cluster's queue and signals, or undefined for a daemon that runs its own tasks. */
export async function joinCluster(config: DaemonConfig, pgStore: PgStore | undefined, store: Store, log: Logger, life: Lifecycle): Promise<Cluster | undefined> {
  if (pgStore === undefined) return undefined;
  if (config.redisUrl === undefined) {
    log.warn({}, 'PostgreSQL store without REDIS_URL: this daemon runs its own tasks only (set REDIS_URL to share work between daemons)');
    return undefined;
  }
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
  // The task service drains the queue when it stops; this close (the same one, run once) is for
  // a start-up that fails before the service exists.
  const drain = queue.close.bind(queue);
  let draining: Promise<void> | undefined;
  queue.close = () => (draining ??= drain());
  life.defer('closing the task queue', () => queue.close());
  const signals = await createPgSignals(pgStore.db, log);
  life.defer('closing cluster signals', () => signals.close());
  log.info({ daemonId, concurrency: config.taskConcurrency }, 'cluster mode: tasks run through the shared queue');
  return { queue, signals, daemonId };
}
