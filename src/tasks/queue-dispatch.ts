/**
 * BullMQ dispatch of Fusion tasks (cluster mode): one queue per workflow (`fusion-investigate`,
 * `fusion-research`), job id = task id, so a task is queued once and active on one worker at a
 * time. BullMQ's job lock is the lease: the worker renews it while the task runs (the
 * heartbeat); when a daemon dies its lock expires, the stalled-job check puts the job back, and
 * another daemon picks it up and resumes the task from its last committed stage boundary (the
 * task service applies the restart-recovery rules: one resume, then supervisor_restarted).
 */
import { Queue, Worker, type Job } from 'bullmq';
import type { Logger } from '../log.js';
import { WORKFLOWS, type Workflow } from '../contracts/constants.js';
import { addWithin, bullConnection, clusterQueuePrefix, waitQueueReady } from '../queue/bullmq-shared.js';
import type { TaskQueue } from './cluster-port.js';

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
        const ac = new AbortController();
        active.set(job.data.taskId, ac);
        try {
          await run({ taskId: job.data.taskId, signal: ac.signal });
        } finally {
          active.delete(job.data.taskId);
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
      // Stop fetching first, then hand the active runs back; close resolves when they settled.
      const closing = workers.map((w) => w.close());
      for (const ac of active.values()) ac.abort('shutdown');
      await Promise.allSettled(closing);
      await Promise.allSettled([...queues.values()].map((q) => q.close()));
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
