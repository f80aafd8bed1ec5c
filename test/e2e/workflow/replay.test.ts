/**
 * Replay verification against a forged record, through a real bwrap replay sandbox: a log and
 * broker record that agree with each other (so every cross-check passes) but claim a tool
 * result the read-only repository does not give are caught by the replay.
 */
import { createHash } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createBwrapLauncher } from '../../../src/launcher/bwrap.js';
import { DEFAULT_SANDBOX_LIMITS } from '../../../src/launcher/port.js';
import { silentLogger } from '../../../src/log.js';
import { CANDIDATE_TOOLS, REJECTED_CALL_EVENT, SCHEMA } from '../../../src/contracts/constants.js';
import { rejectionOf } from '../../../src/contracts/tool-rejection.js';
import type { BrokerRecord, ToolCallLogRecord } from '../../../src/contracts/broker-record.js';
import { crossCheckConversation } from '../../../src/audit/cross-check.js';
import {
  alignStreamedReplay, buildReplayRecord, compareReplay, replayInSandbox, replayInputs, replayRecordOffline, startTaskReplay, type RawToolCall,
} from '../../../src/audit/replay.js';
import { runTool } from '../../../sandbox/tools/index.js';
import { DIST, copyFixtureRepo, describeWithBwrap } from './helpers.js';

const sha = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');
const TOOLS = ['read', 'grep', 'find', 'ls'];

function logRecord(ordinal: number, name: string, args: string, result: string, status: 'ok' | 'error' = 'ok'): ToolCallLogRecord {
  return {
    schema_version: SCHEMA.toolCall, ordinal, tool_name: name, arguments_sha256: sha(args), arguments_bytes: Buffer.byteLength(args),
    result_bytes: Buffer.byteLength(result), result_sha256: sha(result), status, duration_ms: 1,
  };
}

function brokerFor(calls: Array<{ name: string; args: string }>, results: string[]): BrokerRecord[] {
  const at = new Date().toISOString();
  return [
    { kind: 'model', ordinal: 0, at, durationMs: 1, requestBytes: 1, responseBytes: 1, toolCallsRequested: calls.length, ok: true, requested_calls: calls.map((c) => ({ name: c.name, arguments_sha256: sha(c.args) })), sent_results: [], content_sha256: sha('') },
    { kind: 'model', ordinal: 1, at, durationMs: 1, requestBytes: 1, responseBytes: 1, toolCallsRequested: 0, ok: true, requested_calls: [], sent_results: results.map(sha), content_sha256: sha('answer') },
  ];
}

describeWithBwrap('replay verification (bwrap replay sandbox)', () => {
  let fixture: { root: string; repo: string };
  let runRoot: string;
  const launcher = createBwrapLauncher({ log: silentLogger() });
  beforeAll(() => {
    fixture = copyFixtureRepo();
    runRoot = mkdtempSync(join(tmpdir(), 'fsn-rp-'));
    chmodSync(runRoot, 0o711);
  });
  afterAll(() => {
    rmSync(fixture.root, { recursive: true, force: true });
    rmSync(runRoot, { recursive: true, force: true });
  });

  const calls = [
    { name: 'read', args: '{"path":"src/token-bucket.js","limit":20}' },
    { name: 'grep', args: '{"pattern":"refill","path":"src"}' },
    { name: 'ls', args: '' },
  ];
  const replay = (logRecords: ToolCallLogRecord[]) =>
    replayInSandbox({
      launcher, taskId: 'investigate-replaytest', label: 'candidate-1.attempt-1', repoDir: fixture.repo, codeDir: DIST, runRoot,
      owner: null, limits: DEFAULT_SANDBOX_LIMITS, tools: TOOLS,
      calls: replayInputs(logRecords, calls.map((c) => ({ name: c.name, arguments: c.args })), CANDIDATE_TOOLS),
    });

  it('a truthful log replays to the same digests', async () => {
    const results = await Promise.all(calls.map(async (c) => {
      const r = await runTool(c.name, fixture.repo, c.args === '' ? {} : JSON.parse(c.args));
      return r.ok ? r.text : r.error;
    }));
    const log = calls.map((c, i) => logRecord(i, c.name, c.args, results[i]!));
    const replayed = await replay(log);
    expect(replayed).toHaveLength(3);
    expect(() => compareReplay(log, replayed)).not.toThrow();
    // Each call records what it depended on.
    expect(Object.keys(replayed[0]!.touched)).toEqual(['src/token-bucket.js']);
    expect(Object.keys(replayed[2]!.touched)).toEqual(['.']);
    const record = buildReplayRecord(TOOLS, 'bwrap', calls.map((c, i) => ({ ordinal: i, tool_name: c.name, arguments: c.args })), log, replayed);
    expect(await replayRecordOffline(record, fixture.repo)).toMatchObject({ ok: true, replayed: 3 });
  }, 60_000);

  it('a forged broker record whose result digest differs from the replay fails with an audit error', async () => {
    const results = await Promise.all(calls.map(async (c) => {
      const r = await runTool(c.name, fixture.repo, c.args === '' ? {} : JSON.parse(c.args));
      return r.ok ? r.text : r.error;
    }));
    // The grep "result" is forged consistently in the log and in what crossed the broker.
    results[1] = 'src/token-bucket.js:1:nothing to see here';
    const log = calls.map((c, i) => logRecord(i, c.name, c.args, results[i]!));
    expect(() => crossCheckConversation(log, brokerFor(calls, results))).not.toThrow();
    const replayed = await replay(log);
    let caught: unknown;
    try {
      compareReplay(log, replayed);
    } catch (err) {
      caught = err;
    }
    expect(caught).toMatchObject({ code: 'child_event_invalid' });
    expect((caught as Error).message).toMatch(/^tool-call replay failed: call 1 \(grep\): the logged result .* differs from a replay over the read-only repository/);
    // Offline, over the unchanged repository, it is a mismatch, not "repository changed".
    const record = buildReplayRecord(TOOLS, 'bwrap', calls.map((c, i) => ({ ordinal: i, tool_name: c.name, arguments: c.args })), log, replayed);
    expect(await replayRecordOffline(record, fixture.repo)).toMatchObject({ ok: false, ordinal: 1, reason: 'mismatch' });
  }, 60_000);

  it('a differing result the child logged as cut by a timer is replay_inconclusive, and offline inconclusive (time-limited)', async () => {
    const results = await Promise.all(calls.map(async (c) => {
      const r = await runTool(c.name, fixture.repo, c.args === '' ? {} : JSON.parse(c.args));
      return r.ok ? r.text : r.error;
    }));
    results[1] = 'src/token-bucket.js:1:refill\n[search stopped: the pattern ran longer than 2000 ms on files starting at src/token-bucket.js; it may backtrack catastrophically, simplify it]';
    const log = calls.map((c, i) => ({ ...logRecord(i, c.name, c.args, results[i]!), ...(i === 1 ? { timer_cut: true as const } : {}) }));
    const replayed = await replay(log);
    // The replay's own run of this cheap grep finished within its (relaxed) limits.
    expect(replayed[1]?.timer_cut).toBeUndefined();
    expect(() => compareReplay(log, replayed)).toThrow(expect.objectContaining({ code: 'replay_inconclusive', retryable: true }) as unknown as Error);
    const record = buildReplayRecord(TOOLS, 'bwrap', calls.map((c, i) => ({ ordinal: i, tool_name: c.name, arguments: c.args })), log, replayed);
    const offline = await replayRecordOffline(record, fixture.repo);
    expect(offline).toMatchObject({ ok: true, replayed: 3 });
    expect(offline.inconclusive.map((c) => c.ordinal)).toEqual([1]);
  }, 60_000);

  // The replay sandbox reads each file once for all its calls (sandbox/tools/repo-memo.ts): a lie
  // about a call whose files the replay already read (a repeat of the same grep, another grep
  // over the same files with a line left out) is still caught, by the memo-served replay.
  it('a lie about a repeated grep, served by the replay from files it already read, is caught', async () => {
    const repeated = [
      { name: 'grep', args: '{"pattern":"refill","path":"src"}' },
      { name: 'grep', args: '{"pattern":"refill","path":"src"}' },
      { name: 'grep', args: '{"pattern":"token","path":"src"}' },
    ];
    const truth = await Promise.all(repeated.map(async (c) => {
      const r = await runTool(c.name, fixture.repo, JSON.parse(c.args));
      return r.ok ? r.text : r.error;
    }));
    const lines = truth[2]!.split('\n');
    expect(lines.length).toBeGreaterThan(2);
    const cases: Array<{ lie: string[]; ordinal: number }> = [
      { lie: [truth[0]!, 'src/token-bucket.js:1:nothing to see here', truth[2]!], ordinal: 1 },
      { lie: [truth[0]!, truth[1]!, lines.slice(1).join('\n')], ordinal: 2 },
    ];
    for (const { lie, ordinal } of cases) {
      const log = repeated.map((c, i) => logRecord(i, c.name, c.args, lie[i]!));
      const replayed = await replayInSandbox({
        launcher, taskId: 'investigate-replaymemo', label: 'candidate-1.attempt-1', repoDir: fixture.repo, codeDir: DIST, runRoot,
        owner: null, limits: DEFAULT_SANDBOX_LIMITS, tools: TOOLS,
        calls: replayInputs(log, repeated.map((c) => ({ name: c.name, arguments: c.args })), CANDIDATE_TOOLS),
      });
      expect(replayed.map((r) => r.result_sha256)).toEqual(truth.map(sha));
      expect(() => compareReplay(log, replayed)).toThrow(new RegExp(`^tool-call replay failed: call ${ordinal} \\(grep\\): the logged result`));
    }
  }, 60_000);

  // One replay sandbox serves every candidate attempt of a task, each a stream of its own: each
  // stream is answered by its own call indexes, a call another attempt also made (replayed once)
  // included, and a lie in one attempt is caught against that answer.
  it('one replay sandbox answers the calls of several attempts, each on its own, and a lie in one is caught', async () => {
    const raw = calls.map((c) => ({ name: c.name, arguments: c.args }));
    const truth = await Promise.all(calls.map(async (c) => {
      const r = await runTool(c.name, fixture.repo, c.args === '' ? {} : JSON.parse(c.args));
      return r.ok ? r.text : r.error;
    }));
    const task = await startTaskReplay({
      launcher, taskId: 'investigate-replaytask', label: 'candidates.replay', repoDir: fixture.repo, codeDir: DIST, runRoot,
      owner: null, limits: DEFAULT_SANDBOX_LIMITS, tools: TOOLS,
    });
    try {
      const first: RawToolCall[] = [];
      const second: RawToolCall[] = [];
      const abandoned: RawToolCall[] = [raw[0]!];
      const a = task.open('candidate-1.attempt-1', () => first);
      const b = task.open('candidate-2.attempt-1', () => second);
      task.open('candidate-3.attempt-1', () => abandoned).abort();
      // Calls come while the replay runs, as the models ask for them.
      first.push(raw[0]!, raw[1]!);
      second.push(raw[1]!);
      a.endOfCalls();
      second.push(raw[2]!);
      const [ra, rb] = await Promise.all([a.finish(), b.finish()]);
      expect(ra.map((r) => [r.ordinal, r.tool_name, r.result_sha256])).toEqual([[0, 'read', sha(truth[0]!)], [1, 'grep', sha(truth[1]!)]]);
      expect(rb.map((r) => [r.ordinal, r.tool_name, r.result_sha256])).toEqual([[0, 'grep', sha(truth[1]!)], [1, 'ls', sha(truth[2]!)]]);
      const truthful = [logRecord(0, 'grep', calls[1]!.args, truth[1]!), logRecord(1, 'ls', calls[2]!.args, truth[2]!)];
      expect(() => compareReplay(truthful, alignStreamedReplay(truthful, rb))).not.toThrow();
      const lie = [logRecord(0, 'grep', calls[1]!.args, 'src/token-bucket.js:1:nothing to see here'), truthful[1]!];
      expect(() => compareReplay(lie, alignStreamedReplay(lie, rb))).toThrow(/^tool-call replay failed: call 0 \(grep\): the logged result/);
    } finally {
      await task.close();
    }
  }, 60_000);

  it('an attempt whose replay sandbox has ended fails instead of waiting for an answer', async () => {
    let handle: Awaited<ReturnType<typeof launcher.launch>> | undefined;
    const watched = { ...launcher, launch: async (spec: Parameters<typeof launcher.launch>[0]) => (handle = await launcher.launch(spec)) };
    const task = await startTaskReplay({
      launcher: watched, taskId: 'investigate-replaystop', label: 'candidates.replay', repoDir: fixture.repo, codeDir: DIST, runRoot,
      owner: null, limits: DEFAULT_SANDBOX_LIMITS, tools: TOOLS,
    });
    try {
      const stream = task.open('candidate-1.attempt-1', () => [{ name: 'ls', arguments: '' }]);
      await handle!.kill();
      expect((await handle!.exit).reason).not.toBe('exited');
      await expect(stream.finish()).rejects.toMatchObject({ code: 'child_failed', message: expect.stringMatching(/^the replay sandbox ended/) });
    } finally {
      await task.close();
    }
  }, 60_000);

  it('arguments that are not the ones the model sent are refused before any replay', () => {
    const log = [logRecord(0, 'read', '{"path":"README.md"}', 'x')];
    expect(() => replayInputs(log, [{ name: 'read', arguments: '{"path":"src/token-bucket.js"}' }], CANDIDATE_TOOLS)).toThrow(/does not match the arguments the model sent/);
  });

  // Regression: a child could log a valid call as a rejected one (an allowlisted event) so that
  // it never ran and was never replayed. A rejection is now checked by the same rule the child uses.
  it('a call logged as rejected must be one the rule refuses, with exactly the refusal text', () => {
    const bash = '{"cmd":"id"}';
    const refusal = rejectionOf({ name: 'bash', arguments: bash }, CANDIDATE_TOOLS)!;
    expect(replayInputs([logRecord(0, REJECTED_CALL_EVENT, bash, refusal, 'error')], [{ name: 'bash', arguments: bash }], CANDIDATE_TOOLS)).toEqual([]);
    const valid = '{"path":"README.md"}';
    expect(() => replayInputs([logRecord(0, REJECTED_CALL_EVENT, valid, 'anything', 'error')], [{ name: 'read', arguments: valid }], CANDIDATE_TOOLS)).toThrow(/logged as rejected, but the model's call to "read" is valid and had to run/);
    expect(() => replayInputs([logRecord(0, REJECTED_CALL_EVENT, bash, 'other text', 'error')], [{ name: 'bash', arguments: bash }], CANDIDATE_TOOLS)).toThrow(/logged refusal differs/);
  });
});
