/**
 * BullMQ dispatch: queue `research-runs` under the cluster's key prefix (`fusion-<cluster id>`
 * of the research database, like the task queues), job id = run id, 3 attempts with exponential backoff
 * from 1 s, the last 100 completed and 250 failed jobs kept. Every daemon on the same Redis runs
 * a Worker, so they share the work; a job is active on one worker at a time (BullMQ's lock), and
 * the run's claim in the shared store is the second guard. When a worker dies mid-run its lock
 * expires, the job stalls back to waiting, and the next worker re-claims the `running` run.
 */
import { Queue, Worker, type Job } from 'bullmq';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ResearchRunStore } from '../store/research-port.js';
import { DISPATCH_FAILED_MESSAGE, type ResearchDispatcher } from './dispatch.js';
import type { RunExecutor } from './run-executor.js';
import { addWithin, bullConnection, clusterQueuePrefix, waitQueueReady } from '../queue/bullmq-shared.js';

export const RESEARCH_QUEUE = 'research-runs';

export const RESEARCH_JOB_OPTIONS = Object.freeze({
  attempts: 3,
  backoff: { type: 'exponential', delay: 1000 },
  removeOnComplete: 100,
  removeOnFail: 250,
});

/** Job states in which the job has not started and can simply be removed on cancel. */
const REMOVABLE_STATES: ReadonlySet<string> = new Set(['waiting', 'delayed', 'prioritized']);

export interface QueueDispatchOptions {
  redisUrl: string;
  /**
   * The research database's cluster id: the Redis key prefix, so daemons sharing that database
   * share the queue, and daemons of another database on the same Redis never take its jobs.
   */
  clusterId: string;
  store: ResearchRunStore;
  executor: RunExecutor;
  log: Logger;
  concurrency: number;
  /** BullMQ lock duration: how long a dead worker's job stays locked before it counts as stalled. */
  lockDurationMs?: number;
  /** How often workers look for stalled jobs. */
  stalledIntervalMs?: number;
  /** A queue add that has not answered by then counts as failed (ioredis would otherwise wait for Redis forever). */
  addTimeoutMs?: number;
  /** Test seam: replaces `queue.add` (to make it throw). */
  add?: (queue: Queue, runId: string) => Promise<unknown>;
}

interface JobData {
  runId: string;
}

export async function createQueueDispatcher(options: QueueDispatchOptions): Promise<ResearchDispatcher> {
  const log = options.log.child({ component: 'research-queue' });
  const connection = bullConnection(options.redisUrl);
  const prefix = clusterQueuePrefix(options.clusterId);
  const queue = new Queue<JobData>(RESEARCH_QUEUE, { connection, prefix });
  queue.on('error', (err) => log.warn({ err }, 'research queue connection error'));
  const processor = async (job: Job<JobData>): Promise<void> => {
    // A job that already started once (stalled after its worker died, or failed and retried)
    // may find its run `running`: only then is a re-claim allowed.
    const reclaim = job.attemptsStarted > 1 || job.attemptsMade > 0;
    const finalAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    await options.executor.execute(job.data.runId, { reclaim, finalAttempt });
  };
  const worker = new Worker<JobData>(RESEARCH_QUEUE, processor, {
    connection,
    prefix,
    concurrency: options.concurrency,
    ...(options.lockDurationMs !== undefined ? { lockDuration: options.lockDurationMs } : {}),
    ...(options.stalledIntervalMs !== undefined ? { stalledInterval: options.stalledIntervalMs } : {}),
  });
  worker.on('error', (err) => log.warn({ err }, 'research worker error'));
  worker.on('failed', (job, err) => log.warn({ runId: job?.data.runId, attemptsMade: job?.attemptsMade, err }, 'research job attempt failed'));
  await waitQueueReady(queue as Queue, worker as Worker, 'the research queue');
  const add = options.add ?? ((q: Queue, runId: string) => q.add('research-run', { runId }, { jobId: runId, ...RESEARCH_JOB_OPTIONS }));
  const addTimeoutMs = options.addTimeoutMs ?? 10_000;

  return {
    mode: 'queue',
    // Queued until a worker claims it.
    create: (_workspaceId, create) => create(),
    async dispatch(run) {
      try {
        await addWithin(() => add(queue as Queue, run.id), addTimeoutMs);
      } catch (err) {
        log.error({ runId: run.id, err }, 'research queue add failed');
        await options.store.failRun(run.id, 'queued', DISPATCH_FAILED_MESSAGE);
        throw new FusionError('dispatch_failed', DISPATCH_FAILED_MESSAGE, { cause: err, details: { runId: run.id } });
      }
      return { dispatch: { dispatched: true, mode: 'queue', queued: true, queue: RESEARCH_QUEUE, jobId: run.id } };
    },
    async cancel(runId) {
      options.executor.abort(runId);
      try {
        const job = await queue.getJob(runId);
        if (job === undefined) return;
        const state = await job.getState();
        if (REMOVABLE_STATES.has(state)) await job.remove();
      } catch (err) {
        // The run is canceled in the store already: a job that still starts finds nothing to claim.
        log.warn({ runId, err }, 'could not remove the canceled run\'s queue job');
      }
    },
    activeRuns: () => options.executor.activeRuns,
    async close() {
      options.executor.abortAll();
      await worker.close();
      await queue.close();
    },
  };
}
