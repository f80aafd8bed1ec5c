/**
 * Bree schedules the maintenance jobs (retention, orphan reaper, stale-task sweep, backup); each
 * tick worker asks the main thread to run its job (jobs/maintenance-tick.ts). Every run is logged
 * with its summary and reported to `onRun` (the daemon's metrics, src/instrument.ts); a failing run is logged and retried at the next
 * interval. An interval of 0 disables a job.
 */
import Bree from 'bree';
import type { Logger } from '../log.js';
import { toFusionError } from '../errors.js';

export type MaintenanceJobName = 'retention' | 'reaper' | 'stale-sweep' | 'backup';

export interface MaintenanceJob {
  name: MaintenanceJobName;
  intervalMs: number;
  run(): Promise<unknown>;
}

/** One finished maintenance run, as the dashboard lists it. */
export interface MaintenanceRunRecord {
  job: MaintenanceJobName;
  startedAt: string;
  durationMs: number;
  outcome: 'ok' | 'failed';
  /** The job's summary (ok) or the error's code and message (failed). */
  summary: unknown;
}

/** How many finished runs are remembered (in memory: the log holds the full history). */
export const RECENT_MAINTENANCE_RUNS = 50;

export interface MaintenanceScheduler {
  /** Runs one job now, outside the schedule (admin command, tests); resolves with its summary. */
  runNow(name: MaintenanceJobName): Promise<unknown>;
  /** The last finished runs since start-up, newest first. */
  recentRuns(): MaintenanceRunRecord[];
  stop(): Promise<void>;
}

export async function startMaintenance(options: { jobFile: string; jobs: readonly MaintenanceJob[]; log: Logger; onRun?: (job: MaintenanceJobName, outcome: 'ok' | 'failed') => void }): Promise<MaintenanceScheduler> {
  const log = options.log.child({ component: 'maintenance' });
  const byName = new Map(options.jobs.map((j) => [j.name, j]));
  const inFlight = new Map<string, Promise<unknown>>();
  const recent: MaintenanceRunRecord[] = [];
  const remember = (run: MaintenanceRunRecord): void => {
    recent.unshift(run);
    recent.length = Math.min(recent.length, RECENT_MAINTENANCE_RUNS);
  };

  const runJob = (name: MaintenanceJobName): Promise<unknown> => {
    const existing = inFlight.get(name);
    if (existing) return existing;
    const job = byName.get(name);
    if (!job) return Promise.reject(new Error(`no maintenance job ${name}`));
    const started = Date.now();
    const startedAt = new Date(started).toISOString();
    const p = job.run().then(
      (summary) => {
        options.onRun?.(name, 'ok');
        remember({ job: name, startedAt, durationMs: Date.now() - started, outcome: 'ok', summary });
        log.info({ job: name, durationMs: Date.now() - started, summary }, 'maintenance job finished');
        return summary;
      },
      (err: unknown) => {
        options.onRun?.(name, 'failed');
        const fe = toFusionError(err);
        remember({ job: name, startedAt, durationMs: Date.now() - started, outcome: 'failed', summary: { code: fe.code, message: fe.message } });
        log.error({ job: name, durationMs: Date.now() - started, err: toFusionError(err) }, 'maintenance job failed');
        throw err;
      },
    ).finally(() => inFlight.delete(name));
    inFlight.set(name, p);
    return p;
  };

  const scheduled = options.jobs.filter((j) => j.intervalMs > 0);
  const bree = new Bree({
    root: false,
    doRootCheck: false,
    logger: false,
    jobs: scheduled.map((j) => ({ name: j.name, path: options.jobFile, interval: j.intervalMs, timeout: false as const, worker: { workerData: { job: j.name } } })),
    errorHandler: (err: unknown, meta: unknown) => log.warn({ meta, err: String(err) }, 'maintenance worker error'),
    workerMessageHandler: ({ name, message }) => {
      const wanted = (message as { run?: unknown } | null)?.run;
      if (wanted !== name) return;
      void runJob(name as MaintenanceJobName)
        .catch(() => undefined)
        .finally(() => bree.workers.get(name)?.postMessage('done'));
    },
  });
  await bree.start();
  log.info({ jobs: scheduled.map((j) => ({ job: j.name, intervalMs: j.intervalMs })), disabled: options.jobs.filter((j) => j.intervalMs <= 0).map((j) => j.name) }, 'maintenance scheduled');

  return {
    runNow: runJob,
    recentRuns: () => [...recent],
    async stop() {
      await bree.stop().catch(() => undefined);
      await Promise.allSettled([...inFlight.values()]);
    },
  };
}
