/**
 * BullMQ dispatch of Fusion tasks (cluster mode): one queue per workflow (`fusion-investigate`,
 * `fusion-research`), job id = task id, so a task is queued once and active on one worker at a
 * time. BullMQ's job lock is the lease: the worker renews it while the task runs (the
 * heartbeat); when a daemon dies its lock expires, the stalled-job check puts the job back, and
 * another daemon picks it up and resumes the task from its last committed stage boundary (the
 * task service applies the restart-recovery rules: one resume, then supervisor_restarted).
 *
 * Redis may lose jobs (a restart without persistence, a FLUSHALL, an eviction), and with them
 * their locks. So a run also holds a lease in the database (`RunLeases`, which ends with the
 * daemon's session), a job that finds its task leased runs nothing, and a reconciler puts back
 * the job of every unfinished task that has neither a job nor a lease (docs/operations.md#cluster-mode).
 */
import { Queue, Worker, type Job } from 'bullmq';
import type { Logger } from '../log.js';
import { WORKFLOWS, type Workflow } from '../contracts/constants.js';
import { addWithin, bullConnection, clusterQueuePrefix, LIVE_JOB_STATES, waitQueueReady } from '../queue/bullmq-shared.js';
import type { RunLeases, TaskQueue } from './cluster-port.js';

export const taskQueueName = (workflow: Workflow): string => `fusion-${workflow}`;

/**
 * Retries are the drain path (a daemon stopping hands its runs back) and the stall path: the
 * task service, not BullMQ, decides when a task has been resumed enough, so both limits are
 * generous. Completed jobs are kept a day, so a re-add of a finished task is still a no-op.
 */
export const TASK_JOB_OPTIONS = Object.freeze({
  attempts: 20,
  backoff: { type: 'fixed', delay: 500 },
  removeOnComplete: { age: 24 * 3600 },
  removeOnFail: { age: 7 * 24 * 3600 },
});

export interface TaskQueueOptions {
  redisUrl: string;
  /** The shared database's cluster id: the Redis key prefix, so clusters sharing a Redis stay apart. */
  clusterId: string;
  log: Logger;
  /** Tasks this daemon runs at once (over all workflows). */
  concurrency: number;
  /** Lease: how long a dead daemon's job stays locked before it counts as stalled (BullMQ lockDuration). */
  lockDurationMs?: number;
  /** How often workers look for stalled jobs. */
  stalledIntervalMs?: number;
  addTimeoutMs?: number;
  /** The database's run leases: a job runs its task only under the task's lease. */
  leases: RunLeases;
  /** The database's unfinished tasks: what the reconciler compares with the queues. */
  unfinished: () => Promise<ReadonlyArray<{ id: string; workflow: Workflow }>>;
  /** How often the reconciler compares the database with the queues (default 15 s). */
  reconcileIntervalMs?: number;
  /**
   * How long a task must have been seen without a job and without a lease before its job is
   * added again (default 10 s): a receipt adds its job right after its commit, and a daemon
   * takes its leases back right after the database returns.
   */
  reconcileGraceMs?: number;
}

interface JobData {
  taskId: string;
}

/** Thrown by a run stopped by this daemon's drain: BullMQ then retries the job on a daemon still up. */
class HandedBack extends Error {}

export async function createTaskQueue(options: TaskQueueOptions): Promise<TaskQueue> {
  const log = options.log.child({ component: 'task-queue' });
  const connection = bullConnection(options.redisUrl);
  const prefix = clusterQueuePrefix(options.clusterId);
  const queues = new Map<Workflow, Queue<JobData>>(WORKFLOWS.map((w) => [w, new Queue<JobData>(taskQueueName(w), { connection, prefix })]));
  for (const q of queues.values()) q.on('error', (err) => log.warn({ err }, 'task queue connection error'));
  await Promise.all([...queues.values()].map((q) => waitQueueReady(q as Queue, undefined, 'the task queue')));
  const workers: Worker<JobData>[] = [];
  const active = new Map<string, AbortController>();
  // One concurrency over every workflow: a slot is taken before a worker may hold a job.
  let slots = options.concurrency;
  const addTimeoutMs = options.addTimeoutMs ?? 10_000;
  const leases = options.leases;
  // A lease lost while the database was away: another daemon runs the task now, so stop here.
  leases.onLost((taskId) => active.get(taskId)?.abort('lease lost'));
  const reconciler = createReconciler({
    log,
    leases,
    unfinished: options.unfinished,
    locallyActive: (id) => active.has(id),
    queueOf: (w) => queueOf(w),
    add: (q, taskId) => addWithin(() => q.add('fusion-task', { taskId }, { jobId: taskId, ...TASK_JOB_OPTIONS }), addTimeoutMs),
    graceMs: options.reconcileGraceMs ?? 10_000,
  });
  const reconcileIntervalMs = options.reconcileIntervalMs ?? 15_000;
  let reconcileTimer: NodeJS.Timeout | undefined;
  const reconnectTimers = new Set<NodeJS.Timeout>();
  let stopped = false;
  const later = (ms: number): void => {
    if (stopped) return;
    const t = setTimeout(() => {
      reconnectTimers.delete(t);
      void reconciler.pass();
    }, ms);
    t.unref();
    reconnectTimers.add(t);
  };

  const queueOf = (workflow: Workflow): Queue<JobData> => {
    const q = queues.get(workflow);
    if (q === undefined) throw new Error(`no task queue for workflow ${workflow}`);
    return q;
  };

  return {
    async enqueue(task) {
      await addWithin(() => queueOf(task.workflow).add('fusion-task', { taskId: task.id }, { jobId: task.id, ...TASK_JOB_OPTIONS }), addTimeoutMs);
    },
    async start(run) {
      const processor = async (job: Job<JobData>): Promise<void> => {
        const taskId = job.data.taskId;
        // A second job of a task already running (re-added after Redis lost the first) runs
        // nothing; the reconciler adds one again if that run stops without finishing the task.
        // An unreachable database throws here: BullMQ retries the job.
        if (!(await leases.acquire(taskId))) {
          log.info({ taskId }, 'task is already running under its lease; this job ends without running it');
          return;
        }
        const ac = new AbortController();
        active.set(taskId, ac);
        try {
          await run({ taskId, signal: ac.signal });
        } finally {
          active.delete(taskId);
          await leases.release(taskId).catch((err: unknown) => log.warn({ taskId, err }, 'task lease release failed'));
        }
        if (ac.signal.aborted) throw new HandedBack('the daemon running the task is draining; another daemon continues it');
      };
      // Per-workflow workers share this daemon's slots: each may hold `concurrency` jobs, but the
      // processor of a job beyond the daemon's total waits (BullMQ keeps its lock renewed).
      const gated = async (job: Job<JobData>): Promise<void> => {
        while (slots <= 0) await new Promise((r) => setTimeout(r, 50));
        slots--;
        try {
          await processor(job);
        } finally {
          slots++;
        }
      };
      for (const workflow of WORKFLOWS) {
        const worker = new Worker<JobData>(taskQueueName(workflow), gated, {
          connection,
          prefix,
          concurrency: options.concurrency,
          maxStalledCount: 10,
          ...(options.lockDurationMs !== undefined ? { lockDuration: options.lockDurationMs } : {}),
          ...(options.stalledIntervalMs !== undefined ? { stalledInterval: options.stalledIntervalMs } : {}),
        });
        worker.on('error', (err) => log.warn({ err }, 'task worker error'));
        worker.on('failed', (job, err) => {
          if (err instanceof HandedBack || err.message.includes('draining')) log.info({ taskId: job?.data.taskId }, 'task handed back to the queue');
          else log.warn({ taskId: job?.data.taskId, attemptsMade: job?.attemptsMade, err }, 'task job failed');
        });
        workers.push(worker);
      }
      await Promise.all(workers.map((w) => waitQueueReady(queueOf(WORKFLOWS[0]!) as Queue, w as Worker, 'the task queue')));
      reconcileTimer = setInterval(() => void reconciler.pass(), reconcileIntervalMs);
      reconcileTimer.unref();
      // Redis back after a loss of connection (perhaps restarted empty): compare at once, and
      // again once the grace has passed, rather than a full interval later.
      const client = await queueOf(WORKFLOWS[0]!).client;
      client.on('ready', () => {
        log.info({}, 'task queue reconnected to Redis: reconciling the queues with the database');
        later(1000);
        later(1000 + (options.reconcileGraceMs ?? 10_000));
      });
    },
    async removeWaiting(taskId) {
      for (const q of queues.values()) {
        try {
          const job = await q.getJob(taskId);
          if (job === undefined) continue;
          const state = await job.getState();
          if (state === 'waiting' || state === 'delayed' || state === 'prioritized') await job.remove();
        } catch (err) {
          // The store says cancelled already: a job that still starts finds a terminal task.
          log.warn({ taskId, err }, 'could not remove the cancelled task\'s queue job');
        }
      }
    },
    async close() {
      stopped = true;
      clearInterval(reconcileTimer);
      for (const t of reconnectTimers) clearTimeout(t);
      // Stop fetching first, then hand the active runs back; close resolves when they settled.
      const closing = workers.map((w) => w.close());
      for (const ac of active.values()) ac.abort('shutdown');
      await Promise.allSettled(closing);
      await Promise.allSettled([...queues.values()].map((q) => q.close()));
      await leases.close();
    },
    get running() {
      return active.size;
    },
    async queued() {
      const counts = await Promise.all([...queues.values()].map((q) => q.getWaitingCount()));
      return counts.reduce((a, b) => a + b, 0);
    },
  };
}

interface ReconcilerDeps {
  log: Logger;
  leases: RunLeases;
  unfinished: () => Promise<ReadonlyArray<{ id: string; workflow: Workflow }>>;
  locallyActive: (taskId: string) => boolean;
  queueOf: (workflow: Workflow) => Queue<JobData>;
  add: (queue: Queue<JobData>, taskId: string) => Promise<unknown>;
  graceMs: number;
}

/**
 * The queue reconciler: every unfinished task of the database whose job is gone (or ended while
 * the task did not) and whose lease no live daemon holds, seen so for `graceMs`, gets its job
 * again (job id = task id, so daemons reconciling at once add it once). Passes never overlap;
 * a pass that fails (database or Redis away) is logged and the next one tries again.
 */
function createReconciler(deps: ReconcilerDeps): { pass(): Promise<number> } {
  const suspects = new Map<string, number>();
  let running: Promise<number> | undefined;
  const once = async (): Promise<number> => {
    const tasks = await deps.unfinished();
    const leased = await deps.leases.held(tasks.map((t) => t.id));
    const now = Date.now();
    const seen = new Set<string>();
    let requeued = 0;
    for (const task of tasks) {
      if (leased.has(task.id) || deps.locallyActive(task.id)) continue;
      const queue = deps.queueOf(task.workflow);
      const state = await queue.getJobState(task.id);
      if (LIVE_JOB_STATES.has(state)) continue;
      seen.add(task.id);
      const first = suspects.get(task.id);
      if (first === undefined) {
        suspects.set(task.id, now);
        continue;
      }
      if (now - first < deps.graceMs) continue;
      // A completed or failed job keeps its id (and would make the add a no-op): it goes first.
      if (state !== 'unknown') await queue.remove(task.id);
      await deps.add(queue, task.id);
      suspects.delete(task.id);
      requeued++;
      deps.log.warn({ taskId: task.id, jobState: state === 'unknown' ? 'missing' : state }, 'unfinished task had no queue job and no live run: its job was added again');
    }
    for (const id of suspects.keys()) if (!seen.has(id)) suspects.delete(id);
    return requeued;
  };
  return {
    pass() {
      running ??= once()
        .catch((err: unknown) => {
          deps.log.warn({ err }, 'queue reconciliation failed; retried at the next pass');
          return 0;
        })
        .finally(() => {
          running = undefined;
        });
      return running;
    },
  };
}
