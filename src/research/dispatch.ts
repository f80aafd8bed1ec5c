/**
 * How a created run gets executed. Direct (no REDIS_URL): in the create request itself, so the
 * reply already carries the outcome. Queue: a BullMQ job (see queue-dispatch.ts).
 */
import type { ResearchDispatch } from '../contracts/research.js';
import type { ResearchRunRecord } from '../store/research-port.js';
import type { RunExecutor } from './run-executor.js';

export const DISPATCH_FAILED_MESSAGE = 'Research dispatch failed before queue acceptance.';

export interface ResearchDispatcher {
  readonly mode: 'direct' | 'queue';
  /** The User-Agent to claim new runs with at creation (direct: they execute right away), or null. */
  readonly claimOnCreate: string | null;
  /**
   * Hands the freshly created run over for execution. `run` is the run as it ended when the
   * dispatch executed it (direct), so the caller need not read it back.
   */
  dispatch(run: ResearchRunRecord): Promise<{ dispatch: ResearchDispatch; run?: ResearchRunRecord }>;
  /** After the store marked the run canceled: stop it wherever this dispatcher can reach it. */
  cancel(runId: string): Promise<void>;
  /** Runs this daemon is executing right now. */
  activeRuns(): number;
  close(): Promise<void>;
}

/**
 * Direct runs one workspace may execute at once in this daemon. Each direct run holds its create
 * request open and shares the guard's extraction workers with every other run, so without a
 * bound one key could start dozens of crawls and starve the runs of every other workspace (and
 * the task workflow's fetches). Further creates of that workspace wait, in arrival order, with
 * their request open; other workspaces are not held up by them.
 */
export const DIRECT_RUNS_PER_WORKSPACE = 2;

export interface DirectDispatcherOptions {
  /** Default DIRECT_RUNS_PER_WORKSPACE. */
  runsPerWorkspace?: number;
}

export function createDirectResearchDispatcher(executor: RunExecutor, options: DirectDispatcherOptions = {}): ResearchDispatcher {
  const perWorkspace = options.runsPerWorkspace ?? DIRECT_RUNS_PER_WORKSPACE;
  const running = new Map<string, number>();
  const waiting = new Map<string, Array<() => void>>();
  let inFlight = 0;

  /** Resolves true when the run had to wait for a slot of its workspace. */
  const acquire = async (workspaceId: string): Promise<boolean> => {
    const n = running.get(workspaceId) ?? 0;
    if (n < perWorkspace) {
      running.set(workspaceId, n + 1);
      return false;
    }
    await new Promise<void>((resolve) => {
      const queue = waiting.get(workspaceId) ?? [];
      queue.push(resolve);
      waiting.set(workspaceId, queue);
    });
    return true; // the slot was handed over by release()
  };
  const release = (workspaceId: string): void => {
    const queue = waiting.get(workspaceId);
    const next = queue?.shift();
    if (queue !== undefined && queue.length === 0) waiting.delete(workspaceId);
    if (next !== undefined) return next();
    const n = (running.get(workspaceId) ?? 1) - 1;
    if (n <= 0) running.delete(workspaceId);
    else running.set(workspaceId, n);
  };

  return {
    mode: 'direct',
    claimOnCreate: executor.userAgent,
    async dispatch(run) {
      inFlight += 1;
      try {
        const waited = await acquire(run.workspaceId);
        try {
          // A run that waited may have been canceled meanwhile: the executor re-reads it first.
          const claimed = run.status === 'running' ? { claimed: run, ...(waited ? { recheck: true } : {}) } : {};
          const ended = await executor.execute(run.id, { reclaim: false, finalAttempt: true, ...claimed });
          return { dispatch: { dispatched: true, mode: 'direct', queued: false }, ...(ended ? { run: ended } : {}) };
        } finally {
          release(run.workspaceId);
        }
      } finally {
        inFlight -= 1;
      }
    },
    async cancel(runId) {
      executor.abort(runId);
    },
    activeRuns: () => executor.activeRuns,
    async close() {
      // Aborted runs record their failure before the store closes: wait (briefly) for that,
      // and for runs still waiting for a slot (the executor fails them without crawling).
      executor.abortAll();
      const until = Date.now() + 5_000;
      while ((executor.activeRuns > 0 || inFlight > 0) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
    },
  };
}
