/**
 * Executes one research run: claim it (queued → running, or a re-claim of a retried job), crawl
 * under an AbortController, then persist the snapshots and the document (running → succeeded)
 * or the failure (running → failed; also when no page was collected because every URL was
 * skipped). Every write is a compare-and-set on the status, so a cancel
 * that lands meanwhile wins and the late result is dropped: exactly one terminal state.
 *
 * A cancel aborts the crawl directly when it reaches this daemon; a cancel through another
 * daemon sharing the store is noticed by polling the run's status while the crawl is active.
 */
import { FusionError, toFusionError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Crawler, CrawlOutcome, ResearchDocumentText } from './crawl/port.js';
import type { ResearchRunRecord, ResearchRunStore, RunCompletion } from '../store/research-port.js';
import { researchDocumentId } from './run-id.js';
import { SHUTDOWN_MESSAGE } from './dispatch.js';

export type DocumentBuilder = (run: { id: string; query: string }, outcome: CrawlOutcome) => ResearchDocumentText;

export interface RunExecutorOptions {
  store: ResearchRunStore;
  crawler: Crawler;
  buildDocument: DocumentBuilder;
  log: Logger;
  /** How often an active run re-reads its status to notice a cancel made elsewhere (default 250 ms). */
  cancelPollMs?: number;
}

export interface ExecuteOptions {
  /** Allow running → running (a retried queue job). */
  reclaim: boolean;
  /** On the last attempt an unexpected failure marks the run failed instead of leaving it for a retry. */
  finalAttempt: boolean;
  /** The run, already claimed by this caller (created claimed): no separate claim. */
  claimed?: ResearchRunRecord;
}

/** Skips named in the message of a run that collected no page (the run's crawl report lists them all). */
export const NO_PAGE_SKIPS_NAMED = 5;

/** `The research run collected no page: every URL was skipped (N): URL: reason; …`. */
export function noPageMessage(report: RunCompletion['crawlReport']): string {
  const total = report.skipped.length + (report.skippedOmitted ?? 0);
  if (total === 0) return `The research run collected no page${report.stoppedBy === undefined ? '' : ` (stopped: ${report.stoppedBy})`}.`;
  const named = report.skipped.slice(0, NO_PAGE_SKIPS_NAMED).map((s) => `${s.url.slice(0, 200)}: ${s.reason.slice(0, 200)}`);
  const more = total - named.length;
  return `The research run collected no page: every URL was skipped (${String(total)}): ${named.join('; ')}${more > 0 ? `; and ${String(more)} more (see run.crawl)` : ''}.`;
}

/** Marks a shutdown abort, so the executor leaves the run for a retry instead of failing it. */
class ShutdownAbort extends Error {}

export class RunExecutor {
  private readonly active = new Map<string, AbortController>();
  private readonly log: Logger;
  private readonly pollMs: number;
  private shuttingDown = false;

  constructor(private readonly options: RunExecutorOptions) {
    this.log = options.log.child({ component: 'research-executor' });
    this.pollMs = options.cancelPollMs ?? 250;
  }

  get userAgent(): string {
    return this.options.crawler.userAgent;
  }

  get activeRuns(): number {
    return this.active.size;
  }

  /** Aborts the in-process crawl of `runId`, if this daemon runs it. */
  abort(runId: string): boolean {
    const controller = this.active.get(runId);
    controller?.abort(new FusionError('cancelled', `research run ${runId} was canceled`));
    return controller !== undefined;
  }

  /** Daemon shutdown: aborts every active crawl; the runs are failed (direct) or left for a retry (queue). */
  abortAll(): void {
    this.shuttingDown = true;
    for (const controller of this.active.values()) controller.abort(new ShutdownAbort('the daemon is shutting down'));
  }

  /**
   * The error a run with these sources would fail with before its crawl sends anything (a
   * source the egress policy refuses on its own), else undefined: such a run can be created
   * already failed, in one write, with the message its execution would have recorded.
   */
  refusal(sourceUrls: readonly string[]): FusionError | undefined {
    return this.options.crawler.sourceRefusal?.(sourceUrls);
  }

  /** Logs a run created failed by `refusal`, as a failed execution is logged. */
  noteRefused(runId: string, error: FusionError): void {
    this.log.info({ runId, code: error.code, err: error, refusedBeforeCrawl: true }, 'research run failed');
  }

  /** Fails a run that never started (still `queued`): the daemon is shutting down. */
  failQueued(runId: string, message: string): Promise<ResearchRunRecord | null> {
    return this.options.store.failRun(runId, 'queued', message);
  }

  /** Returns the run as it ended, or null when it was not claimable (already taken, canceled, terminal). */
  async execute(runId: string, opts: ExecuteOptions): Promise<ResearchRunRecord | null> {
    const { store, crawler } = this.options;
    if (this.active.has(runId)) return null; // already executing in this process
    if (this.shuttingDown) {
      // A run that reaches the executor after abortAll (it was waiting for a slot) never starts.
      const abort = new ShutdownAbort('the daemon is shutting down');
      if (opts.finalAttempt) await store.failRun(runId, 'running', SHUTDOWN_MESSAGE).catch(() => undefined);
      throw abort;
    }
    // Registered before the claim, so a cancel arriving right after the claim commits finds it.
    const controller = new AbortController();
    this.active.set(runId, controller);
    let run: ResearchRunRecord | null;
    try {
      run = opts.claimed ?? (await store.claimRun(runId, crawler.userAgent, opts.reclaim));
    } catch (err) {
      this.active.delete(runId);
      throw err;
    }
    if (run === null) {
      this.active.delete(runId);
      this.log.debug({ runId }, 'research run not claimable; skipped');
      return null;
    }
    const poll = setInterval(() => {
      store.getRun(runId).then(
        (current) => current?.status !== 'running' && controller.abort(new FusionError('cancelled', `research run ${runId} was canceled`)),
        () => undefined,
      );
    }, this.pollMs);
    poll.unref();
    this.log.info({ runId, claims: run.claims, userAgent: crawler.userAgent }, 'research run started');
    try {
      let completion: RunCompletion;
      try {
        const outcome = await crawler.crawl({ runId, query: run.query, sourceUrls: run.sourceUrls, limits: run.limits }, controller.signal);
        completion = this.completion(run, outcome);
      } catch (err) {
        if (controller.signal.reason instanceof ShutdownAbort) throw controller.signal.reason;
        if (controller.signal.aborted) return await store.getRun(runId);
        const fe = toFusionError(err);
        this.log.info({ runId, code: fe.code, err: fe }, 'research run failed');
        return (await store.failRun(runId, 'running', fe.message)) ?? (await store.getRun(runId));
      }
      if (completion.snapshots.length === 0) {
        // Nothing collected is not a result: the run fails, naming why every URL was skipped,
        // and keeps its crawl report (docs/behaviour.md#g6).
        const message = noPageMessage(completion.crawlReport);
        this.log.info({ runId, skipped: completion.crawlReport.skipped.length }, 'research run collected no page; failed');
        return (await store.failRun(runId, 'running', message, completion.crawlReport)) ?? (await store.getRun(runId));
      }
      const done = await store.completeRun(runId, completion);
      if (done === null) {
        this.log.info({ runId }, 'research run finished after a cancel; result dropped');
        return store.getRun(runId);
      }
      this.log.info({ runId, snapshots: completion.snapshots.length }, 'research run succeeded');
      return done;
    } catch (err) {
      if (opts.finalAttempt) {
        const message = err instanceof ShutdownAbort ? SHUTDOWN_MESSAGE : toFusionError(err).message;
        await store.failRun(runId, 'running', message).catch(() => undefined);
      }
      throw err;
    } finally {
      clearInterval(poll);
      this.active.delete(runId);
    }
  }

  private completion(run: ResearchRunRecord, outcome: CrawlOutcome): RunCompletion {
    const text = this.options.buildDocument({ id: run.id, query: run.query }, outcome);
    return {
      snapshots: outcome.snapshots,
      crawlReport: {
        robots: outcome.robots,
        skipped: outcome.skipped,
        ...(outcome.skippedOmitted ? { skippedOmitted: outcome.skippedOmitted } : {}),
        ...(outcome.stoppedBy !== undefined ? { stoppedBy: outcome.stoppedBy } : {}),
      },
      document: {
        id: researchDocumentId(run.id),
        runId: run.id,
        workspaceId: run.workspaceId,
        name: text.name,
        mimeType: 'text/markdown',
        tags: ['research'],
        sourceUri: `research:${run.id}`,
        indexingStatus: 'pending',
        status: 'ready',
        enabled: true,
        content: text.content,
      },
    };
  }
}
