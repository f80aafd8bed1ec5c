/**
 * Which failed candidate attempts get a fresh one (docs/behaviour.md#b4): a transient launch
 * failure and an inconclusive replay, each once per candidate, never after the stage stopped,
 * and nothing else (a forgery, a crash, a timeout).
 */
import { describe, expect, it } from 'vitest';
import { FusionError } from '../../../src/errors.js';
import { candidateRetryReason, type CandidateRetryReason } from '../../../src/workflow/candidate-retry.js';

const running = new AbortController().signal;
const none: ReadonlySet<CandidateRetryReason> = new Set();

describe('candidateRetryReason', () => {
  it('retries an inconclusive replay once', () => {
    const err = new FusionError('replay_inconclusive', 'tool-call replay inconclusive');
    expect(candidateRetryReason(err, none, running)).toBe('replay_inconclusive');
    expect(candidateRetryReason(err, new Set(['replay_inconclusive']), running)).toBeUndefined();
  });

  it('retries a transient launch failure once, and keeps that budget apart from the replay\'s', () => {
    const err = new FusionError('launch_failed', 'bwrap could not start', { retryable: true });
    expect(candidateRetryReason(err, new Set(['replay_inconclusive']), running)).toBe('launch_failed');
    expect(candidateRetryReason(err, new Set(['launch_failed']), running)).toBeUndefined();
    expect(candidateRetryReason(new FusionError('launch_failed', 'no such image', { retryable: false }), none, running)).toBeUndefined();
  });

  it('never retries a forgery, a crash or a timeout', () => {
    for (const code of ['child_event_invalid', 'child_failed', 'child_timeout', 'model_error'] as const) {
      expect(candidateRetryReason(new FusionError(code, 'x', { retryable: true }), none, running)).toBeUndefined();
    }
  });

  it('never retries once the stage was stopped (a failed sibling, a cancel)', () => {
    const stopped = new AbortController();
    stopped.abort('sibling_failed');
    expect(candidateRetryReason(new FusionError('replay_inconclusive', 'x'), none, stopped.signal)).toBeUndefined();
  });
});
