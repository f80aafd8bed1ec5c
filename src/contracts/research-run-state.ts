/**
 * The research-run state machine as one transition table. Every status change in a research
 * store goes through `assertRunTransition`.
 *
 *   queued   → running (claimed, only while no cancel was requested) | failed (dispatch) | canceled
 *   running  → succeeded (document persisted) | failed | canceled
 *            → running again only as a re-claim: a retried queue job whose first executor died
 *   succeeded, failed, canceled: terminal, no exits.
 */
import { FusionError } from '../errors.js';
import type { ResearchRunStatus } from './research.js';

export const RUN_TRANSITIONS: Readonly<Record<ResearchRunStatus, readonly ResearchRunStatus[]>> = {
  queued: ['running', 'failed', 'canceled'],
  running: ['running', 'succeeded', 'failed', 'canceled'],
  succeeded: [],
  failed: [],
  canceled: [],
};

export function isTerminalRun(status: ResearchRunStatus): boolean {
  return RUN_TRANSITIONS[status].length === 0;
}

export function canRunTransition(from: ResearchRunStatus, to: ResearchRunStatus): boolean {
  return RUN_TRANSITIONS[from].includes(to);
}

export function assertRunTransition(from: ResearchRunStatus, to: ResearchRunStatus): void {
  if (!canRunTransition(from, to)) {
    throw new FusionError('invalid_transition', `research run cannot move from ${from} to ${to}`, { details: { from, to } });
  }
}

/** States a cancel moves to `canceled`. */
export const CANCELABLE: readonly ResearchRunStatus[] = (Object.keys(RUN_TRANSITIONS) as ResearchRunStatus[]).filter((s) => RUN_TRANSITIONS[s].includes('canceled'));
