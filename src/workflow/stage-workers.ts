/**
 * Evaluator, repair and merger stages run as Bree jobs: one worker thread per stage attempt,
 * with V8 resource limits and a wall timeout. The job entry (`jobs/stage-worker.js`) is thin;
 * it runs the same agent loop as a sandbox child, with no tools, against its own broker socket.
 */
import Bree from 'bree';
import type { Worker } from 'node:worker_threads';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';

export interface StageWorkerSpec {
  /** Unique job name, e.g. `<taskId>:evaluator:1`. */
  name: string;
  workerData: { requestFile: string; outDir: string; brokerSocket: string };
  timeoutMs: number;
  maxOldGenerationSizeMb: number;
  signal?: AbortSignal;
}

export interface StageWorkerExit {
  exitCode: number;
  reason: 'exited' | 'timeout' | 'aborted';
  durationMs: number;
}

export interface StageWorkers {
  run(spec: StageWorkerSpec): Promise<StageWorkerExit>;
  stop(): Promise<void>;
}

/** Bree's logger calls (message, meta); route them to pino as (meta, message). */
function breeLogger(log: Logger): Record<'info' | 'warn' | 'error' | 'debug', (msg: unknown, meta?: unknown) => void> {
  const fmt = (msg: unknown): string => (msg instanceof Error ? msg.message : String(msg));
  return {
    debug: (msg, meta) => log.debug({ meta }, fmt(msg)),
    info: (msg, meta) => log.debug({ meta }, fmt(msg)),
    warn: (msg, meta) => log.warn({ meta }, fmt(msg)),
    error: (msg, meta) => log.warn({ meta }, fmt(msg)),
  };
}

export function createBreeStageWorkers(options: { jobFile: string; log: Logger }): StageWorkers {
  const log = options.log.child({ component: 'stage-workers' });
  const bree = new Bree({
    root: false,
    jobs: [],
    doRootCheck: false,
    logger: breeLogger(log) as unknown as Bree.BreeLogger,
    // Exits are observed per worker below; Bree's own handler only logs.
    errorHandler: (err: unknown, meta: unknown) => log.debug({ meta, err: String(err) }, 'stage worker error'),
  });

  return {
    async run(spec) {
      const started = Date.now();
      await bree.add({
        name: spec.name,
        path: options.jobFile,
        worker: {
          workerData: spec.workerData,
          resourceLimits: { maxOldGenerationSizeMb: spec.maxOldGenerationSizeMb, maxYoungGenerationSizeMb: 32, stackSizeMb: 4 },
        },
      });
      try {
        const exit = await new Promise<StageWorkerExit>((resolve, reject) => {
          let reason: StageWorkerExit['reason'] = 'exited';
          let worker: Worker | undefined;
          const stopWorker = (why: StageWorkerExit['reason']): void => {
            reason = why;
            void worker?.terminate();
          };
          const timer = setTimeout(() => stopWorker('timeout'), spec.timeoutMs);
          const onAbort = (): void => stopWorker('aborted');
          spec.signal?.addEventListener('abort', onAbort, { once: true });
          bree
            .run(spec.name)
            .then(() => {
              worker = bree.workers.get(spec.name);
              if (!worker) {
                clearTimeout(timer);
                reject(new FusionError('launch_failed', `stage worker ${spec.name} did not start`));
                return;
              }
              if (spec.signal?.aborted) stopWorker('aborted');
              worker.once('exit', (code: number) => {
                clearTimeout(timer);
                spec.signal?.removeEventListener('abort', onAbort);
                resolve({ exitCode: code, reason, durationMs: Date.now() - started });
              });
            })
            .catch((err: unknown) => {
              clearTimeout(timer);
              reject(new FusionError('launch_failed', `stage worker ${spec.name} could not start: ${String(err)}`, { cause: err }));
            });
        });
        log.info({ job: spec.name, exitCode: exit.exitCode, reason: exit.reason, durationMs: exit.durationMs }, 'stage worker exited');
        return exit;
      } finally {
        await bree.remove(spec.name).catch(() => undefined);
      }
    },
    async stop() {
      await bree.stop().catch(() => undefined);
    },
  };
}
