/**
 * Evaluator, repair and merger stages run in worker threads of the daemon (V8 heap limit, wall
 * timeout): a stage that runs away with memory or hangs is stopped without taking the daemon
 * down. The threads are pooled and reused across stages and tasks: a new worker thread per stage
 * left ~26 KB of native memory behind each time (2–3 per task, issue 16), so the daemon's RSS
 * grew with every task. The job entry (`jobs/stage-worker.js`) is thin; it runs the same agent
 * loop as a sandbox child, with no tools, against the broker socket of each run.
 *
 * A worker that is stopped (timeout, cancellation) or dies (crash, heap limit) is never reused:
 * it is terminated and a fresh one is started for the next stage. A healthy worker is retired
 * after `maxRunsPerWorker` runs so nothing a stage leaves in the thread's heap can pile up.
 */
import { Worker } from 'node:worker_threads';
import type { StageDoneMessage, StageRunData, StageRunMessage } from '../contracts/stage-worker-protocol.js';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';

export interface StageWorkerSpec {
  /** Unique run name, e.g. `<taskId>:evaluator:1` (logs and metrics). */
  name: string;
  workerData: StageRunData;
  timeoutMs: number;
  maxOldGenerationSizeMb: number;
  signal?: AbortSignal;
}

export interface StageWorkerExit {
  /** 0 answered, 3 output cap, 1 failed; a worker that died reports its thread exit code. */
  exitCode: number;
  reason: 'exited' | 'timeout' | 'aborted';
  durationMs: number;
}

export interface StageWorkers {
  run(spec: StageWorkerSpec): Promise<StageWorkerExit>;
  stop(): Promise<void>;
}

export interface StageWorkerPoolOptions {
  jobFile: string;
  log: Logger;
  /** Idle workers kept for reuse (more may run at once; the extra ones end after their run). */
  maxIdle?: number;
  maxRunsPerWorker?: number;
}

interface PooledWorker {
  worker: Worker;
  heapMb: number;
  runs: number;
  exited: boolean;
}

const DEFAULT_MAX_IDLE = 4;
const DEFAULT_MAX_RUNS_PER_WORKER = 200;

export function createStageWorkerPool(options: StageWorkerPoolOptions): StageWorkers {
  const log = options.log.child({ component: 'stage-workers' });
  const maxIdle = options.maxIdle ?? DEFAULT_MAX_IDLE;
  const maxRuns = options.maxRunsPerWorker ?? DEFAULT_MAX_RUNS_PER_WORKER;
  const idle: PooledWorker[] = [];
  const all = new Set<PooledWorker>();
  let nextId = 1;
  let stopped = false;

  const start = (heapMb: number): PooledWorker => {
    const worker = new Worker(options.jobFile, {
      resourceLimits: { maxOldGenerationSizeMb: heapMb, maxYoungGenerationSizeMb: 32, stackSizeMb: 4 },
    });
    const pooled: PooledWorker = { worker, heapMb, runs: 0, exited: false };
    all.add(pooled);
    // An error outside a run (e.g. at load) must not be unhandled; the exit that follows removes it.
    worker.on('error', (err) => log.warn({ err }, 'stage worker error'));
    worker.once('exit', () => {
      pooled.exited = true;
      all.delete(pooled);
      const at = idle.indexOf(pooled);
      if (at >= 0) idle.splice(at, 1);
    });
    return pooled;
  };

  const take = (heapMb: number): PooledWorker => {
    const at = idle.findIndex((w) => w.heapMb === heapMb && !w.exited);
    if (at < 0) return start(heapMb);
    const [pooled] = idle.splice(at, 1) as [PooledWorker];
    return pooled;
  };

  const release = (pooled: PooledWorker): void => {
    if (stopped || pooled.exited || pooled.runs >= maxRuns || idle.length >= maxIdle) {
      void pooled.worker.terminate();
      return;
    }
    // An idle worker must not keep an embedded daemon's process alive.
    pooled.worker.unref();
    idle.push(pooled);
  };

  return {
    async run(spec) {
      if (stopped) throw new FusionError('launch_failed', `stage worker ${spec.name} not started: the daemon is stopping`);
      const started = Date.now();
      let pooled: PooledWorker;
      try {
        pooled = take(spec.maxOldGenerationSizeMb);
      } catch (err) {
        throw new FusionError('launch_failed', `stage worker ${spec.name} could not start: ${String(err)}`, { cause: err });
      }
      pooled.runs += 1;
      pooled.worker.ref();
      const id = nextId++;
      const exit = await new Promise<StageWorkerExit>((resolve) => {
        const { worker } = pooled;
        let reason: StageWorkerExit['reason'] = 'exited';
        const finish = (exitCode: number): void => {
          clearTimeout(timer);
          spec.signal?.removeEventListener('abort', onAbort);
          worker.off('message', onMessage);
          worker.off('exit', onExit);
          resolve({ exitCode, reason, durationMs: Date.now() - started });
        };
        // A stopped worker is never handed back: it may be mid-call, its state unknown.
        const stopWorker = (why: StageWorkerExit['reason']): void => {
          reason = why;
          pooled.exited = true;
          void worker.terminate();
        };
        const onMessage = (msg: StageDoneMessage): void => {
          if (msg.type === 'done' && msg.id === id && reason === 'exited') finish(msg.exitCode);
        };
        const onExit = (code: number): void => {
          pooled.exited = true;
          finish(code === 0 && reason === 'exited' ? 1 : code);
        };
        const onAbort = (): void => stopWorker('aborted');
        const timer = setTimeout(() => stopWorker('timeout'), spec.timeoutMs);
        worker.on('message', onMessage);
        worker.once('exit', onExit);
        spec.signal?.addEventListener('abort', onAbort, { once: true });
        if (spec.signal?.aborted) {
          stopWorker('aborted');
          return;
        }
        worker.postMessage({ type: 'run', id, data: spec.workerData } satisfies StageRunMessage);
      });
      release(pooled);
      log.info({ job: spec.name, exitCode: exit.exitCode, reason: exit.reason, durationMs: exit.durationMs, workerRuns: pooled.runs }, 'stage worker run ended');
      return exit;
    },
    async stop() {
      stopped = true;
      idle.length = 0;
      await Promise.all([...all].map((w) => w.worker.terminate().catch(() => undefined)));
    },
  };
}
