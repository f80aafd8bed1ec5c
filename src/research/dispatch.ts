/**
 * How a created run gets executed. Direct (no REDIS_URL): in the create request itself, so the
 * reply already carries the outcome; a run waiting for a slot of its workspace is `queued` until
 * it starts. Queue: a BullMQ job (see queue-dispatch.ts).
 */
import type { ResearchDispatch } from '../contracts/research.js';
import { isTerminalRun } from '../contracts/research-run-state.js';
import type { ResearchRunRecord } from '../store/research-port.js';
import type { RunExecutor } from './run-executor.js';

export const DISPATCH_FAILED_MESSAGE = 'Research dispatch failed before queue acceptance.';

/** The error of a run the daemon's shutdown kept from starting or finishing. */
export const SHUTDOWN_MESSAGE = 'The daemon shut down before the research run finished.';

/** Why a run waiting for a slot of its workspace stopped waiting. */
type Wake = 'slot' | 'canceled' | 'shutdown';

export interface ResearchDispatcher {
  readonly mode: 'direct' | 'queue';
  /**
   * Creates a run through `create`, passing the User-Agent to claim it with at creation when this
   * dispatcher starts it at once (direct, with a free slot of its workspace), else nothing: the
   * run is created `queued` and claimed when it starts (docs/behaviour.md#g6, in both modes).
   * Direct dispatch also passes `failWith` when the run's `sourceUrls` would fail its crawl before
   * any request (a source the egress policy refuses on its own): the run is created claimed and
   * failed with that message at once, the outcome its execution would have recorded.
   */
  create<T extends { created: boolean }>(
    workspaceId: string,
    create: (claimAs?: string, failWith?: string) => Promise<T>,
    run?: { id: string; sourceUrls: readonly string[] },
  ): Promise<T>;
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
  /** Runs waiting for a slot, per workspace in arrival order; each is woken with why. */
  const waiting = new Map<string, Array<{ runId: string; wake: (outcome: Wake) => void }>>();
  let inFlight = 0;
  let closing = false;

  /** Takes a slot now if one is free and nobody waits for one (arrival order); never waits. */
  const tryTake = (workspaceId: string): boolean => {
    const n = running.get(workspaceId) ?? 0;
    if (closing || n >= perWorkspace || (waiting.get(workspaceId)?.length ?? 0) > 0) return false;
    running.set(workspaceId, n + 1);
    return true;
  };
  /** Waits for a slot of the workspace: `slot` when handed one, or why it stopped waiting. */
  const acquire = (workspaceId: string, runId: string): Promise<Wake> => {
    if (tryTake(workspaceId)) return Promise.resolve('slot');
    return new Promise<Wake>((wake) => {
      const queue = waiting.get(workspaceId) ?? [];
      queue.push({ runId, wake });
      waiting.set(workspaceId, queue);
    });
  };
  const release = (workspaceId: string): void => {
    const queue = waiting.get(workspaceId);
    const next = queue?.shift();
    if (queue !== undefined && queue.length === 0) waiting.delete(workspaceId);
    if (next !== undefined) return next.wake('slot'); // the slot passes on
    const n = (running.get(workspaceId) ?? 1) - 1;
    if (n <= 0) running.delete(workspaceId);
    else running.set(workspaceId, n);
  };
  /** Stops a run's wait without a slot; true when it was waiting. */
  const unwait = (runId: string, outcome: Exclude<Wake, 'slot'>): boolean => {
    for (const [workspaceId, queue] of waiting) {
      const at = queue.findIndex((w) => w.runId === runId);
      if (at < 0) continue;
      const [entry] = queue.splice(at, 1);
      if (queue.length === 0) waiting.delete(workspaceId);
      entry!.wake(outcome);
      return true;
    }
    return false;
  };

  const direct = { dispatched: true, mode: 'direct', queued: false } as const;
  return {
    mode: 'direct',
    async create<T extends { created: boolean }>(
      workspaceId: string,
      create: (claimAs?: string, failWith?: string) => Promise<T>,
      run?: { id: string; sourceUrls: readonly string[] },
    ): Promise<T> {
      // A run its crawl would fail before any request needs no slot: it is recorded as it would
      // end (claimed, then failed), in the one insert.
      const refused = closing || run === undefined ? undefined : executor.refusal(run.sourceUrls);
      if (refused !== undefined && run !== undefined) {
        const outcome = await create(executor.userAgent, refused.message);
        if (outcome.created) executor.noteRefused(run.id, refused);
        return outcome;
      }
      // Claimed at creation only when it starts at once: a run that must wait stays `queued`
      // until it has a slot, so nobody reads `running` (or a startedAt) for a run not started.
      if (!tryTake(workspaceId)) return create();
      let outcome: T;
      try {
        outcome = await create(executor.userAgent);
      } catch (err) {
        release(workspaceId);
        throw err;
      }
      // A deduplicated create started nothing: its slot is not kept.
      if (!outcome.created) release(workspaceId);
      return outcome;
    },
    async dispatch(run) {
      // Created failed (a source refused before any request): nothing left to execute.
      if (isTerminalRun(run.status)) return { dispatch: direct, run };
      inFlight += 1;
      try {
        if (run.status !== 'running') {
          const woken = await acquire(run.workspaceId, run.id);
          if (woken === 'canceled') return { dispatch: direct };
          if (woken === 'shutdown') {
            const failed = await executor.failQueued(run.id, SHUTDOWN_MESSAGE);
            return { dispatch: direct, ...(failed ? { run: failed } : {}) };
          }
        }
        // The slot is held: taken at creation (created `running`) or handed over just now.
        try {
          const claimed = run.status === 'running' ? { claimed: run } : {};
          const ended = await executor.execute(run.id, { reclaim: false, finalAttempt: true, ...claimed });
          return { dispatch: direct, ...(ended ? { run: ended } : {}) };
        } finally {
          release(run.workspaceId);
        }
      } finally {
        inFlight -= 1;
      }
    },
    async cancel(runId) {
      // A waiting run stops waiting now (its create request answers `canceled`); a running one is aborted.
      if (!unwait(runId, 'canceled')) executor.abort(runId);
    },
    activeRuns: () => executor.activeRuns,
    async close() {
      // Runs still waiting for a slot are failed without crawling; aborted runs record their
      // failure before the store closes: wait (briefly) for both.
      closing = true;
      for (const queue of [...waiting.values()]) for (const entry of [...queue]) unwait(entry.runId, 'shutdown');
      executor.abortAll();
      const until = Date.now() + 5_000;
      while ((executor.activeRuns > 0 || inFlight > 0) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
    },
  };
}
