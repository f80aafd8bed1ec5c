import { describe, expect, it } from 'vitest';
import { TASK_STATES, TRANSITIONS, assertTransition, canTransition, isTerminal, statusOf } from '../../../src/contracts/task-state.js';

describe('task state machine (docs/behaviour.md#b2)', () => {
  it('walks the happy path in order', () => {
    const path = ['initializing', 'candidates_running', 'candidates_complete', 'evaluating', 'evaluation_complete', 'merging', 'completed'] as const;
    for (let i = 0; i + 1 < path.length; i++) expect(canTransition(path[i]!, path[i + 1]!)).toBe(true);
  });

  it('lets every non-terminal state fail or be cancelled, and terminal states go nowhere', () => {
    for (const s of TASK_STATES) {
      if (isTerminal(s)) {
        expect(TRANSITIONS[s]).toEqual([]);
      } else {
        expect(canTransition(s, 'failed')).toBe(true);
        expect(canTransition(s, 'cancelled')).toBe(true);
      }
    }
  });

  it('refuses skips and backwards moves with invalid_transition', () => {
    expect(() => assertTransition('initializing', 'evaluating')).toThrow(/cannot move from initializing to evaluating/);
    expect(() => assertTransition('merging', 'candidates_running')).toThrow(expect.objectContaining({ code: 'invalid_transition' }));
    expect(() => assertTransition('completed', 'failed')).toThrow();
  });

  it('reports running until terminal', () => {
    expect(statusOf('evaluating')).toBe('running');
    expect(statusOf('cancelled')).toBe('cancelled');
  });
});
