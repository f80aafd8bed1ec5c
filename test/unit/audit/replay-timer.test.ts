/**
 * A replayed call whose result depended on a wall-clock limit: a difference is no proof of a
 * forgery (replay_inconclusive, retryable), but a difference where neither side was cut stays
 * child_event_invalid, and a child's timer flag is only accepted where a timer can cut.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SCHEMA } from '../../../src/contracts/constants.js';
import type { ToolCallLogRecord } from '../../../src/contracts/broker-record.js';
import { buildReplayRecord, compareReplay, replayRecordOffline, type ReplayRecord } from '../../../src/audit/replay.js';
import { checkToolPolicy, parseToolCallLog } from '../../../src/audit/verify-log.js';
import { ERROR_CODES } from '../../../src/common/error-codes.js';
import { FusionError } from '../../../src/errors.js';
import { replayCalls, type ReplayedCall } from '../../../sandbox/replay-core.js';
import { logText, record, sha256 } from './log-fixtures.js';

const TOOLS = ['read', 'grep', 'find', 'ls'];

function logged(overrides: Partial<ToolCallLogRecord> = {}): ToolCallLogRecord {
  return {
    schema_version: SCHEMA.toolCall, ordinal: 0, tool_name: 'grep', arguments_sha256: sha256('args'), arguments_bytes: 4,
    result_bytes: 10, result_sha256: sha256('the truth!'), status: 'ok', duration_ms: 1, ...overrides,
  };
}

function replayed(overrides: Partial<ReplayedCall> = {}): ReplayedCall {
  return { ordinal: 0, tool_name: 'grep', status: 'ok', result_bytes: 10, result_sha256: sha256('the truth!'), touched: { '.': sha256('tree') }, ...overrides };
}

function thrown(fn: () => void): FusionError {
  try {
    fn();
  } catch (err) {
    if (err instanceof FusionError) return err;
    throw err;
  }
  throw new Error('expected a FusionError');
}

const other = { result_sha256: sha256('something else'), result_bytes: 14 };

describe('compareReplay and wall-clock limits', () => {
  it('a fabricated result where neither side was cut fails as child_event_invalid', () => {
    const err = thrown(() => compareReplay([logged(other)], [replayed()]));
    expect(err.code).toBe('child_event_invalid');
    expect(err.message).toMatch(/^tool-call replay failed: call 0 \(grep\): the logged result/);
  });

  it('a difference where the replay was cut by a timer is replay_inconclusive, retryable', () => {
    const err = thrown(() => compareReplay([logged(other)], [replayed({ timer_cut: true })]));
    expect(err.code).toBe('replay_inconclusive');
    expect(err.retryable).toBe(true);
    expect(err.message).toContain('depended on a time limit on a loaded host');
    expect(err.message).toContain('the replay was cut short');
    expect(err.message).toContain("the attempt's answer is not used; retry");
  });

  it('a difference where the candidate logged a timer cut is replay_inconclusive', () => {
    const err = thrown(() => compareReplay([logged({ ...other, timer_cut: true })], [replayed()]));
    expect(err.code).toBe('replay_inconclusive');
    expect(err.message).toContain("the candidate's run was cut short");
  });

  it('equal results pass whatever the timer flags say', () => {
    expect(() => compareReplay([logged({ timer_cut: true })], [replayed({ timer_cut: true })])).not.toThrow();
    expect(() => compareReplay([logged()], [replayed({ timer_cut: true })])).not.toThrow();
  });

  it('reports an inconclusive difference to its own observer, and a forgery to the mismatch one', () => {
    const seen: string[] = [];
    const metrics = { mismatched: () => seen.push('mismatched'), inconclusive: () => seen.push('inconclusive') };
    thrown(() => compareReplay([logged(other)], [replayed({ timer_cut: true })], metrics));
    thrown(() => compareReplay([logged(other)], [replayed()], metrics));
    compareReplay([logged({ timer_cut: true })], [replayed({ timer_cut: true })], metrics);
    expect(seen).toEqual(['inconclusive', 'mismatched']);
  });

  it('the error is registered as a retryable code', () => {
    expect(ERROR_CODES.replay_inconclusive.retryable).toBe(true);
  });
});

describe('the timer flag in the child log', () => {
  it('is parsed when true and refused otherwise', () => {
    const [rec] = parseToolCallLog(Buffer.from(logText([record(0, { tool_name: 'grep', timer_cut: true })])));
    expect(rec?.timer_cut).toBe(true);
    expect(() => parseToolCallLog(Buffer.from(logText([record(0, { tool_name: 'grep', timer_cut: false })])))).toThrow(/timer_cut must be true/);
  });

  it('is refused on a fetch or a failed call', () => {
    const fetchRec = parseToolCallLog(Buffer.from(logText([record(0, { tool_name: 'fusion_web_fetch', url: 'https://example.com/a', final_url: 'https://example.com/a', http_status: 200, response_bytes: 1, content_sha256: sha256('x'), timer_cut: true })])));
    expect(() => checkToolPolicy(fetchRec, ['fusion_web_fetch'], ['https://example.com/a'])).toThrow(/must not carry timer_cut/);
    const failed = parseToolCallLog(Buffer.from(logText([record(0, { tool_name: 'grep', status: 'error', timer_cut: true })])));
    expect(() => checkToolPolicy(failed, TOOLS, [])).toThrow(/must not carry timer_cut/);
    const fine = parseToolCallLog(Buffer.from(logText([record(0, { tool_name: 'grep', timer_cut: true })])));
    expect(() => checkToolPolicy(fine, TOOLS, [])).not.toThrow();
  });
});

describe('offline replay of a time-limited call', () => {
  let dir = '';
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  async function recordFor(logOverrides: Partial<ToolCallLogRecord>): Promise<ReplayRecord> {
    dir = mkdtempSync(join(tmpdir(), 'fusion-replay-timer-'));
    writeFileSync(join(dir, 'a.txt'), 'needle\n');
    const call = { ordinal: 0, tool_name: 'grep', arguments: JSON.stringify({ pattern: 'needle' }) };
    const again = await replayCalls(dir, [call], TOOLS);
    const log = [logged({ arguments_sha256: sha256(call.arguments), ...logOverrides })];
    return buildReplayRecord(TOOLS, 'bwrap', [call], log, again);
  }

  it('reports a differing call the run logged as timer-cut as inconclusive (time-limited), not a forgery', async () => {
    const rec = await recordFor({ ...other, timer_cut: true });
    expect(rec.calls[0]?.timer_cut).toBe(true);
    const outcome = await replayRecordOffline(rec, dir);
    expect(outcome.ok).toBe(true);
    expect(outcome.inconclusive).toEqual([{ ordinal: 0, message: expect.stringContaining('inconclusive (time-limited)') as unknown as string }]);
  });

  it('still reports a differing call that no timer cut as a mismatch', async () => {
    const outcome = await replayRecordOffline(await recordFor(other), dir);
    expect(outcome).toMatchObject({ ok: false, reason: 'mismatch', inconclusive: [] });
  });
});
