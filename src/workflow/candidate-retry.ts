/**
 * When a failed candidate attempt gets a fresh one (docs/behaviour.md#b4). Each reason below is
 * good for one retry per candidate in a run; any other failure, a second failure for the same
 * reason, or a stage that was stopped (a failed sibling, a cancel) fails the candidate, and so
 * the run. The fresh attempt is an attempt of its own: its own number, sealed log, tarball and
 * replay record, all kept in the audit whatever its outcome; only a success commits the
 * candidate's checkpoint (attempt-lifecycle.ts), so a candidate that succeeded never runs again.
 */
import type { ErrorCode, FusionError } from '../errors.js';

/** Why each retried failure is worth a second attempt. */
export const CANDIDATE_RETRY_REASONS = {
  // The sandbox could not be created for a passing reason, before the child existed: nothing ran.
  launch_failed: 'transient launch failure',
  // A wall-clock limit cut a result on one side of the replay: a difference that the host's load
  // can explain proves neither a forgery nor the result, and a fresh attempt may not be cut.
  replay_inconclusive: 'replay inconclusive (a wall-clock limit cut a differing result)',
} as const satisfies Partial<Record<ErrorCode, string>>;

export type CandidateRetryReason = keyof typeof CANDIDATE_RETRY_REASONS;

const isRetryReason = (code: string): code is CandidateRetryReason => Object.hasOwn(CANDIDATE_RETRY_REASONS, code);

/**
 * The reason `err` gets the candidate one more attempt, or undefined when it does not: the error
 * is not a retryable one of the reasons, the candidate was already retried for it, or its stage
 * was stopped.
 */
export function candidateRetryReason(err: FusionError, retried: ReadonlySet<CandidateRetryReason>, stageSignal: AbortSignal): CandidateRetryReason | undefined {
  if (stageSignal.aborted || !err.retryable || !isRetryReason(err.code) || retried.has(err.code)) return undefined;
  return err.code;
}
