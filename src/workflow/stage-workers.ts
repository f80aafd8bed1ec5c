/**
 * Bree schedules the evaluator, repair and merger stages. Its job list names the three stages (one
 * entry file for all, `jobs/stage-worker.js`, which runs `sandbox/agent-loop.ts` with no tools), and
 * each stage run is `bree.run(<stage>)`: a fresh worker thread with V8 resource limits, given the
 * run's files and broker socket as its workerData, ended by the daemon on the run's wall timeout
 * or when its task is cancelled. A stage that runs away with memory or hangs is stopped without
 * taking the daemon down, and no run inherits anything from an earlier one.
 *
 * Bree keeps one worker per job name, so concurrent runs use lanes: each lane is one Bree instance
 * with the same three jobs and runs one stage at a time; a run waits for a free lane (`lanes` is
 * the stage concurrency limit).
 *
 * A thread per run was once replaced by a pool because RSS grew with tasks. Measured again (docs/
 * operations.md, Memory over many tasks), a finished thread leaves about 5 KB of native memory
 * with or without `MALLOC_ARENA_MAX=2` (not glibc's per-thread arenas), and over 120 tasks the
 * daemon's RSS grows no faster than with the pool while holding no idle thread heaps.
 */
import Bree from 'bree';
import { Worker, type WorkerOptions } from 'node:worker_threads';
import type { StageRunData } from '../contracts/stage-worker-protocol.js';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';

/** The stages Bree schedules, in its job list, in workflow order. */
export const STAGE_JOBS = ['evaluator', 'repair', 'merger'] as const;
export type StageJob = (typeof STAGE_JOBS)[number];

export interface StageWorkerSpec {
  /** Unique run name, e.g. `<taskId>:evaluator:1` (logs and metrics); the part after the task id names the Bree job. */
  name: string;
  workerData: StageRunData;
  timeoutMs: number;
  maxOldGenerationSizeMb: number;
  signal?: AbortSignal;
}

export interface StageWorkerExit {
  /** The thread's exit code: 0 answered, 3 output cap, 1 failed (a crash also exits 1). */
  exitCode: number;
  reason: 'exited' | 'timeout' | 'aborted';
  durationMs: number;
}

export interface StageWorkers {
  run(spec: StageWorkerSpec): Promise<StageWorkerExit>;
  stop(): Promise<void>;
}

export interface StageScheduler extends StageWorkers {
  /** The job names in Bree's job list (the same on every lane). */
  breeJobs(): string[];
}

export interface StageSchedulerOptions {
  jobFile: string;
  log: Logger;
  /** Stage runs at once (each in its own worker thread); further runs wait for a lane. */
  lanes?: number;
}

interface Lane {
  index: number;
  bree: Bree;
  /** Options of the next worker this lane's Bree creates (the run's workerData and heap limit). */
  next: Partial<WorkerOptions>;
}

const DEFAULT_LANES = 4;

/** `<taskId>:merger:2` → `merger`; the stage must be one of the job list. */
export function stageJobOf(runName: string): StageJob {
  const named = runName.split(':').at(-2);
  const job = STAGE_JOBS.find((j) => j === named);
  if (!job) throw new FusionError('launch_failed', `stage run ${JSON.stringify(runName)} names no Bree stage job (one of ${STAGE_JOBS.join(', ')})`);
  return job;
}

/** The Bree job list of one lane: every stage, one entry file, the fixed part of the limits. */
export function stageJobList(jobFile: string): Array<{ name: StageJob; path: string; timeout: false; interval: 0; worker: Partial<WorkerOptions> }> {
  return STAGE_JOBS.map((name) => ({
    name,
    path: jobFile,
    // Run on demand only: a stage is started by its task, never by the clock.
    timeout: false as const,
    interval: 0 as const,
    worker: { resourceLimits: { maxYoungGenerationSizeMb: 32, stackSizeMb: 4 } },
  }));
}

export async function startStageScheduler(options: StageSchedulerOptions): Promise<StageScheduler> {
  const log = options.log.child({ component: 'stage-workers' });
  const laneCount = Math.max(1, options.lanes ?? DEFAULT_LANES);
  const lanes: Lane[] = [];
  for (let index = 0; index < laneCount; index++) {
    const bree = new Bree({
      root: false,
      doRootCheck: false,
      logger: false,
      jobs: stageJobList(options.jobFile),
      // A run's exit is observed and logged below, with its reason; Bree's report would repeat it.
      errorHandler: (err: unknown, meta: unknown) => log.debug({ lane: index, meta, err: String(err) }, 'stage worker exit reported by Bree'),
    });
    const lane: Lane = { index, bree, next: {} };
    // Bree's documented seam for how a job's worker is made: the run's own workerData and heap
    // limit go on top of the job's options (Bree's `run(name)` takes no per-run data).
    bree.createWorker = (filename, workerOptions) =>
      new Worker(filename, {
        ...workerOptions,
        ...lane.next,
        resourceLimits: { ...workerOptions.resourceLimits, ...lane.next.resourceLimits },
        workerData: { ...(workerOptions.workerData as object), ...(lane.next.workerData as object) },
      });
    // Bree 9 validates the job list (the entry file exists) in init(), missing from its type
    // definitions: a bad path fails the daemon's start, not the first stage.
    await (bree as unknown as { init(): Promise<void> }).init();
    lanes.push(lane);
  }
  const free = [...lanes];
  const waiting: Array<(lane: Lane | undefined) => void> = [];
  let stopped = false;

  const acquire = (signal: AbortSignal | undefined): Promise<Lane | undefined> => {
    const lane = free.shift();
    if (lane) return Promise.resolve(lane);
    return new Promise((resolve) => {
      const onAbort = (): void => {
        const at = waiting.indexOf(take);
        if (at >= 0) waiting.splice(at, 1);
        resolve(undefined);
      };
      const take = (l: Lane | undefined): void => {
        signal?.removeEventListener('abort', onAbort);
        resolve(l);
      };
      waiting.push(take);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  };
  const release = (lane: Lane): void => {
    lane.next = {};
    const next = waiting.shift();
    if (next) next(lane);
    else free.push(lane);
  };

  const runOnLane = (lane: Lane, job: StageJob, spec: StageWorkerSpec, started: number): Promise<StageWorkerExit> =>
    new Promise<StageWorkerExit>((resolve, reject) => {
      lane.next = { workerData: spec.workerData, resourceLimits: { maxOldGenerationSizeMb: spec.maxOldGenerationSizeMb } };
      let reason: StageWorkerExit['reason'] = 'exited';
      let worker: Worker | undefined;
      let timer: NodeJS.Timeout | undefined;
      const stopWorker = (why: StageWorkerExit['reason']): void => {
        if (reason !== 'exited') return;
        reason = why;
        void worker?.terminate();
      };
      const onAbort = (): void => stopWorker('aborted');
      const done = (): void => {
        clearTimeout(timer);
        spec.signal?.removeEventListener('abort', onAbort);
      };
      lane.bree.run(job).then(
        () => {
          worker = lane.bree.workers.get(job);
          if (!worker) {
            done();
            reject(new FusionError('launch_failed', `stage worker ${spec.name} did not start (Bree job ${job} on lane ${lane.index})`));
            return;
          }
          worker.once('exit', (code: number) => {
            done();
            resolve({ exitCode: code, reason, durationMs: Date.now() - started });
          });
          timer = setTimeout(() => stopWorker('timeout'), spec.timeoutMs);
          spec.signal?.addEventListener('abort', onAbort, { once: true });
          if (spec.signal?.aborted) stopWorker('aborted');
        },
        (err: unknown) => {
          done();
          reject(new FusionError('launch_failed', `stage worker ${spec.name} could not start: ${String(err)}`, { cause: err }));
        },
      );
    });

  return {
    breeJobs: () => [...new Set(lanes.flatMap((lane) => (lane.bree.config.jobs as Array<{ name: string }>).map((j) => j.name)))],
    async run(spec) {
      const job = stageJobOf(spec.name);
      if (stopped) throw new FusionError('launch_failed', `stage worker ${spec.name} not started: the daemon is stopping`);
      const started = Date.now();
      const lane = await acquire(spec.signal);
      if (stopped) {
        if (lane) release(lane);
        throw new FusionError('launch_failed', `stage worker ${spec.name} not started: the daemon is stopping`);
      }
      // Cancelled while it waited for a lane: it never started.
      if (!lane) return { exitCode: 1, reason: 'aborted', durationMs: Date.now() - started };
      try {
        const exit = spec.signal?.aborted ? { exitCode: 1, reason: 'aborted' as const, durationMs: 0 } : await runOnLane(lane, job, spec, started);
        log.info({ job: spec.name, stage: job, lane: lane.index, exitCode: exit.exitCode, reason: exit.reason, durationMs: exit.durationMs }, 'stage worker run ended');
        return exit;
      } finally {
        release(lane);
      }
    },
    async stop() {
      stopped = true;
      for (const take of waiting.splice(0)) take(undefined);
      await Promise.all(
        lanes.map(async (lane) => {
          // Bree's stop asks a worker to cancel and waits; a stage worker does not answer, so end them.
          await Promise.all([...lane.bree.workers.values()].map((w) => w.terminate().catch(() => undefined)));
          await lane.bree.stop().catch(() => undefined);
        }),
      );
    },
  };
}
