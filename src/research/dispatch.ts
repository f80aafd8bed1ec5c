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

export function createDirectResearchDispatcher(executor: RunExecutor): ResearchDispatcher {
  return {
    mode: 'direct',
    claimOnCreate: executor.userAgent,
    async dispatch(run) {
      const ended = await executor.execute(run.id, { reclaim: false, finalAttempt: true, ...(run.status === 'running' ? { claimed: run } : {}) });
      return { dispatch: { dispatched: true, mode: 'direct', queued: false }, ...(ended ? { run: ended } : {}) };
    },
    async cancel(runId) {
      executor.abort(runId);
    },
    activeRuns: () => executor.activeRuns,
    async close() {
      // Aborted runs record their failure before the store closes: wait (briefly) for that.
      executor.abortAll();
      const until = Date.now() + 5_000;
      while (executor.activeRuns > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
    },
  };
}
