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
 *
 * Redis may lose jobs (docs/operations.md#cluster-mode): a reconciler re-adds the job of every
 * unfinished run that has none. A `queued` run is safe to re-add (its claim is a compare-and-set);
 * a `running` one only with run leases (a PostgreSQL research database): a run executes under
 * its lease, so a run whose job is gone and whose lease no live daemon holds was abandoned, and
 * its new job may re-claim it.
 */
import { Queue, Worker, type Job } from 'bullmq';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ResearchRunStore } from '../store/research-port.js';
import { DISPATCH_FAILED_MESSAGE, type ResearchDispatcher } from './dispatch.js';
import type { RunExecutor } from './run-executor.js';
import { addWithin, bullConnection, clusterQueuePrefix, LIVE_JOB_STATES, waitQueueReady } from '../queue/bullmq-shared.js';
import type { RunLeases } from '../store/signals-port.js';

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
  /** Run leases (PostgreSQL research database): without them only `queued` runs are reconciled. */
  leases?: RunLeases;
  /** How often the reconciler compares the unfinished runs with the queue (default 15 s). */
  reconcileIntervalMs?: number;
  /** How long a run must have been seen without a job (and lease) before its job is added again (default 10 s). */
  reconcileGraceMs?: number;
}

interface JobData {
  runId: string;
  /** Added by the reconciler for a `running` run nobody runs: the first attempt may re-claim it. */
  reclaim?: boolean;
}

/** The lease key of a research run (task ids and run ids share the lease namespace). */
const leaseId = (runId: string): string => `research-run:${runId}`;
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
  const leases = options.leases;
  leases?.onLost((id) => {
    if (id.startsWith('research-run:')) options.executor.abort(id.slice('research-run:'.length));
  });
  if (setting !== 'cluster') await claimQueue(queue, prefix, options.clusterId);
  const processor = async (job: Job<JobData>): Promise<void> => {
    // A job that already started once (stalled after its worker died, or failed and retried)
    // may find its run `running`: only then is a re-claim allowed (or when the reconciler
    // re-added the job of an abandoned running run).
    const reclaim = job.attemptsStarted > 1 || job.attemptsMade > 0 || job.data.reclaim === true;
    const finalAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    const runId = job.data.runId;
    // A second job of a run already running (re-added after Redis lost the first) runs nothing.
    if (leases !== undefined && !(await leases.acquire(leaseId(runId)))) {
      log.info({ runId }, 'research run is already running under its lease; this job ends without running it');
      return;
    }
    try {
      await options.executor.execute(runId, { reclaim, finalAttempt });
    } finally {
      await leases?.release(leaseId(runId)).catch((err: unknown) => log.warn({ runId, err }, 'research run lease release failed'));
    }
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

  const graceMs = options.reconcileGraceMs ?? 10_000;
  const suspects = new Map<string, number>();
  const reconcileOnce = async (): Promise<number> => {
    const runs = (await options.store.listUnfinished()).filter((r) => r.status === 'queued' || leases !== undefined);
    const leased = leases === undefined ? new Set<string>() : await leases.held(runs.map((r) => leaseId(r.id)));
    const now = Date.now();
    const seen = new Set<string>();
    let requeued = 0;
    for (const run of runs) {
      if (leased.has(leaseId(run.id))) continue;
      const state = await queue.getJobState(run.id);
      if (LIVE_JOB_STATES.has(state)) continue;
      seen.add(run.id);
      const first = suspects.get(run.id);
      if (first === undefined) {
        suspects.set(run.id, now);
        continue;
      }
      if (now - first < graceMs) continue;
      if (state !== 'unknown') await queue.remove(run.id);
      const reclaim = run.status === 'running';
      await addWithin(() => queue.add('research-run', { runId: run.id, ...(reclaim ? { reclaim } : {}) }, { jobId: run.id, ...RESEARCH_JOB_OPTIONS }), addTimeoutMs);
      suspects.delete(run.id);
      requeued++;
      log.warn({ runId: run.id, status: run.status, jobState: state === 'unknown' ? 'missing' : state }, 'unfinished research run had no queue job and no live run: its job was added again');
    }
    for (const id of suspects.keys()) if (!seen.has(id)) suspects.delete(id);
    return requeued;
  };
  let reconciling: Promise<number> | undefined;
  const reconcile = (): Promise<number> =>
    (reconciling ??= reconcileOnce()
      .catch((err: unknown) => {
        log.warn({ err }, 'research queue reconciliation failed; retried at the next pass');
        return 0;
      })
      .finally(() => {
        reconciling = undefined;
      }));
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number): void => {
    const t = setTimeout(() => {
      timers.delete(t);
      void reconcile();
    }, ms);
    t.unref();
    timers.add(t);
  };
  const interval = setInterval(() => void reconcile(), options.reconcileIntervalMs ?? 15_000);
  interval.unref();
  (await queue.client).on('ready', () => {
    later(1000);
    later(1000 + graceMs);
  });

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
      clearInterval(interval);
      for (const t of timers) clearTimeout(t);
      options.executor.abortAll();
      await worker.close();
      await queue.close();
      await leases?.close();
    },
  };
}
