/**
 * BullMQ dispatch: queue `research-runs` under the configured key prefix (docs/operations.md#research-queue-name):
 * BullMQ's default `bull` unless set, so the queue is `bull:research-runs` where BullMQ tools look;
 * `cluster` puts it under the research database's cluster prefix (`fusion-<cluster id>`, like
 * the task queues) for several research databases on one Redis. A shared prefix records the
 * research database that owns it, and a daemon of another database refuses to start on it
 * (its jobs would name runs that database does not hold). Job id = run id, 3 attempts with exponential backoff
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

/** BullMQ's own default key prefix: `bull:research-runs` is the queue every BullMQ tool finds. */
export const DEFAULT_RESEARCH_QUEUE_PREFIX = 'bull';

/** The Redis key prefix of the research queue for a `researchQueuePrefix` setting. */
export function researchQueuePrefix(setting: string, clusterId: string): string {
  return setting === 'cluster' ? clusterQueuePrefix(clusterId) : setting;
}

/** The key (beside BullMQ's own under the queue) naming the research database that owns a shared queue. */
export function queueOwnerKey(prefix: string): string {
  return `${prefix}:${RESEARCH_QUEUE}:fusion-owner`;
}

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
  /** `bull` (default), `cluster`, or a literal prefix (docs/operations.md#research-queue-name). */
  queuePrefix?: string;
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

/**
 * Records this research database as the owner of a shared-prefix queue, or refuses when another
 * database owns it: two databases on one queue would each take jobs naming runs only the other
 * holds, and those runs would never start.
 */
async function claimQueue(queue: Queue<JobData>, prefix: string, clusterId: string): Promise<void> {
  let owner: string | null;
  try {
    // ioredis underneath: SET … NX (BullMQ's client type names only its own option shapes).
    const client = (await queue.client) as unknown as { set(key: string, value: string, mode: 'NX'): Promise<unknown>; get(key: string): Promise<string | null> };
    await client.set(queueOwnerKey(prefix), clusterId, 'NX');
    owner = await client.get(queueOwnerKey(prefix));
  } catch (err) {
    await queue.close().catch(() => undefined);
    throw new FusionError('invalid_config', `cannot reach Redis at REDIS_URL for the research queue: ${(err as Error).message}`, { cause: err });
  }
  if (owner !== clusterId) {
    await queue.close().catch(() => undefined);
    throw new FusionError(
      'invalid_config',
      `the research queue ${prefix}:${RESEARCH_QUEUE} on this Redis belongs to another research database (cluster ${String(owner)}); give this daemon --research-queue-prefix cluster (or another prefix), or share that database`,
      { details: { path: 'researchQueuePrefix', prefix, owner, clusterId } },
    );
  }
}

export async function createQueueDispatcher(options: QueueDispatchOptions): Promise<ResearchDispatcher> {
  const log = options.log.child({ component: 'research-queue' });
  const connection = bullConnection(options.redisUrl);
  const setting = options.queuePrefix ?? DEFAULT_RESEARCH_QUEUE_PREFIX;
  const prefix = researchQueuePrefix(setting, options.clusterId);
  const queue = new Queue<JobData>(RESEARCH_QUEUE, { connection, prefix });
  queue.on('error', (err) => log.warn({ err }, 'research queue connection error'));
  if (setting !== 'cluster') await claimQueue(queue, prefix, options.clusterId);
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
