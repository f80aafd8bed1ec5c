/**
 * The commit of a stage attempt, shared by the candidate and no-tool stages: its row gets its
 * outcome, detail and tarball digest. In cluster mode (`deps.archiveAttempts`) the attempt's
 * evidence is first stored in the database (audit/attempt-archive.ts), so the daemon that
 * seals the task need not be the one that ran the attempt; an attempt whose evidence could not
 * be stored fails.
 */
import { FusionError, toFusionError } from '../errors.js';
import { archiveAttempt } from '../audit/attempt-archive.js';
import type { RunState, WorkflowDeps } from './stage-context.js';

export interface AttemptSettlement {
  stage: string;
  attempt: number;
  status: 'succeeded' | 'failed';
  detail: Record<string, unknown>;
  tarball?: { path: string; sha256: string } | undefined;
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
  });
  return archiveError === undefined ? { status } : { status, error: archiveError };
}
