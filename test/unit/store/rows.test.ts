/**
 * The store hands out a task's JSON columns parsed and checked against their contracts
 * (src/store/rows.ts): options and usage arrive typed, and a row whose JSON does not fit is a
 * store_error naming the task, never text a caller casts.
 */
import { describe, expect, it } from 'vitest';
import { toTaskRecord, type TaskRow } from '../../../src/store/rows.js';

const row = (over: Partial<TaskRow> = {}): TaskRow => ({
  id: 'investigate-1', workflow: 'investigate', state: 'completed', repo_dir: '/r', canonical_input: '{}', canonical_input_sha256: 'c'.repeat(64),
  budget_plan: '{}', options: '{"repoExclude":["a/"],"sandbox":"bwrap"}', created_at: 't', updated_at: 't', error_code: null, error_message: null, error_state: null,
  usage: '{"entries":[{"inputTokens":5,"model":"m","outputTokens":2,"requests":1,"stage":"merger"}],"totals":{"inputTokens":5,"outputTokens":2,"requests":1}}',
  usage_delivered: 0, resume_count: 0, caller_uid: null, bundle_digest: null, caller_gid: null, caller_groups: null, ...over,
});

describe('task rows', () => {
  it('hand out options and usage parsed', () => {
    const task = toTaskRecord(row());
    expect(task.options).toEqual({ sandbox: 'bwrap', repoExclude: ['a/'] });
    expect(task.usage?.totals).toEqual({ inputTokens: 5, outputTokens: 2, requests: 1 });
    expect(task.usage?.entries[0]?.stage).toBe('merger');
    expect(toTaskRecord(row({ usage: null })).usage).toBeNull();
  });

  it.each([
    ['options that are not JSON', { options: '{' }],
    ['options outside the contract', { options: '{"sandbox":"vm"}' }],
    ['an unknown option', { options: '{"speed":1}' }],
    ['usage outside the contract', { usage: '{"tokens":12}' }],
  ])('refuse %s as store_error naming the task', (_what, over) => {
    expect(() => toTaskRecord(row(over))).toThrow(expect.objectContaining({ code: 'store_error', details: expect.objectContaining({ taskId: 'investigate-1' }) }));
  });
});
