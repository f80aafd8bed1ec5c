/**
 * The commit of a stage attempt, shared by the candidate and no-tool stages: its row gets its
 * outcome, detail and tarball digest, and, in the same store transaction, the task's usage and
 * (for a success) the stage's checkpoint, so a stage that succeeded is never run again after a
 * crash (docs/behaviour.md#b13). In cluster mode (`deps.archiveAttempts`) the attempt's
 * evidence is first stored in the database (audit/attempt-archive.ts), so the daemon that
 * seals the task need not be the one that ran the attempt; an attempt whose evidence could not
 * be stored fails.
 */
import { FusionError, toFusionError } from '../errors.js';
import { archiveAttempt } from '../audit/attempt-archive.js';
import { canonicalJson } from '../contracts/canonical.js';
import type { RunState, WorkflowDeps } from './stage-context.js';

export interface AttemptSettlement {
  stage: string;
  attempt: number;
  status: 'succeeded' | 'failed';
  detail: Record<string, unknown>;
  tarball?: { path: string; sha256: string } | undefined;
  /** What a resumed run needs instead of running this stage again; committed only with a success. */
  checkpoints?: ReadonlyArray<{ key: string; value: string }>;
}

/**
 * Records the attempt's end. Returns the status recorded and, when the archive could not be
 * stored (the attempt is then recorded failed), the error the caller must throw once it has
 * reported the attempt.
 */
export async function settleAttempt(deps: WorkflowDeps, run: RunState, s: AttemptSettlement): Promise<{ status: 'succeeded' | 'failed'; error?: FusionError }> {
  let { status, detail } = s;
  let archiveError: FusionError | undefined;
  if (s.tarball !== undefined && deps.archiveAttempts === true) {
    try {
      await archiveAttempt(run.control.store, deps.tasksDir, run.task.id, s.stage, s.attempt, s.tarball.path);
    } catch (err) {
      archiveError = toFusionError(err, 'store_error', s.stage);
      archiveError = new FusionError(archiveError.code, `${s.stage} attempt ${s.attempt} could not be stored in the database: ${archiveError.message}`, { stage: s.stage, cause: err });
      status = 'failed';
      detail = { ...detail, error: { code: archiveError.code, message: archiveError.message } };
    }
  }
  await run.control.store.finishAttempt(run.task.id, s.stage, s.attempt, {
    status,
    detail: JSON.stringify(detail),
    ...(s.tarball ? { tarballPath: s.tarball.path, tarballSha256: s.tarball.sha256 } : {}),
    // Every model call so far was paid for, whatever the outcome.
    usage: usageJson(run.usage),
    ...(status === 'succeeded' && s.checkpoints !== undefined ? { checkpoints: s.checkpoints } : {}),
  });
  return archiveError === undefined ? { status } : { status, error: archiveError };
}

/** The task's usage column: every entry and their totals. */
export function usageJson(entries: RunState['usage']): string {
  return canonicalJson({ entries, totals: totals(entries) });
}

function totals(entries: RunState['usage']): { requests: number; inputTokens: number; outputTokens: number; cost?: number } {
  const sum = entries.reduce((t, e) => ({ requests: t.requests + e.requests, inputTokens: t.inputTokens + e.inputTokens, outputTokens: t.outputTokens + e.outputTokens }), { requests: 0, inputTokens: 0, outputTokens: 0 });
  const priced = entries.filter((e) => e.cost !== undefined);
  return priced.length === 0 ? sum : { ...sum, cost: priced.reduce((c, e) => c + (e.cost ?? 0), 0) };
}
