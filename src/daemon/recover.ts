/**
 * What the previous run of this data directory left: decides whether the daemon starts
 * read-only (a full disk), then resumes, fails or re-queues the unfinished tasks and seals the
 * terminal ones a stopped daemon left unsealed.
 */
import type { Logger } from '../log.js';
import type { DaemonConfig } from '../contracts/config.js';
import type { TaskService } from '../tasks/task-service.js';
import { freeBytesOrUndefined } from '../tasks/free-space.js';
import type { Cluster } from './cluster.js';

/** Recovers the tasks; returns whether the daemon runs read-only. */
export async function recoverTasks(config: DaemonConfig, tasks: TaskService, cluster: Cluster | undefined, log: Logger): Promise<{ readOnly: boolean }> {
  // On a full disk the daemon starts read-only: status and results are served; nothing is
  // accepted, resumed or sealed until space is freed and the daemon restarted, so an
  // interrupted task is not failed for want of a write (it resumes at the next start).
  const startFree = freeBytesOrUndefined(config.home);
  const readOnly = startFree !== undefined && startFree < config.storageReserveBytes;
  if (readOnly) {
    log.warn(
      { home: config.home, freeBytes: startFree, reserveBytes: config.storageReserveBytes },
      'the disk holding the data directory is full: starting read-only (status and results are readable; no task is accepted or resumed until space is freed and the daemon restarted)',
    );
    tasks.setReadOnly(`the daemon started read-only because the disk holding ${config.home} was full; free space and restart it`);
    return { readOnly };
  }
  if (cluster !== undefined) {
    // Cluster mode: a dead daemon's tasks come back through the queue (their leases expire); here
    // only tasks that never got a job are queued again. Nothing is resumed from this list, since
    // other daemons run some of those tasks right now.
    await cluster.signals.subscribe({ events: (id) => tasks.remoteEvents(id), cancel: (id) => tasks.remoteCancel(id) });
    const requeued = await tasks.requeueUnfinished();
    if (requeued > 0) log.info({ unfinished: requeued }, 'cluster: unfinished tasks have their queue jobs');
    await cluster.queue.start((job) => tasks.runQueued(job));
  } else {
    const recovered = await tasks.recover();
    if (recovered.resumed.length + recovered.failed.length > 0) log.warn(recovered, 'restart recovery');
  }
  const resealed = await tasks.sealUnsealed();
  if (resealed.length > 0) log.warn({ tasks: resealed }, 'sealed terminal tasks a stopped daemon had left unsealed');
  return { readOnly };
}
