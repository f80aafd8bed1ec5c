/**
 * A candidate attempt whose replay is inconclusive (a tool result a wall-clock limit cut differs
 * from the replay's) is retried once, as an attempt of its own (docs/behaviour.md#b4), through
 * the real daemon, real bwrap sandboxes and the real replay sandbox: a fresh attempt that is not
 * cut completes the task, and a second inconclusive attempt fails it. Each inconclusive attempt
 * is counted in `fusion_replay_inconclusive_total`.
 *
 * The cut is real: candidate 1's model asks for a catastrophic regex over a line that makes V8
 * backtrack for far longer than either side's watchdog, so the child's grep (2 s) and the
 * replay's (5× that) are both cut, and their notes name different limits.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { ModelProvider } from '../../../src/models/port.js';
import { verifyTaskTarball } from '../../../src/audit/offline-verify.js';
import { readMembers } from '../../../src/audit/tar-members.js';
import { builtin, builtinRoster, describeWithBwrap, ourSandboxProcesses, startE2EDaemon, waitFor, wrapProvider, type E2EDaemon } from './helpers.js';

const SLOW_FILE = 'slow.txt';
const SLOW_GREP = JSON.stringify({ pattern: '^(a+)+$', path: SLOW_FILE });

let d: E2EDaemon | undefined;
afterEach(async () => {
  await d?.close();
  d = undefined;
});

/**
 * Candidate 1's model: in its first `slowAttempts` attempts it asks for the catastrophic grep and
 * then answers in two lines; afterwards it is the builtin content search.
 */
function cutThenBuiltin(slowAttempts: number): { provider: ModelProvider; attempts: () => number } {
  let attempts = 0;
  const provider = wrapProvider(builtin('content-search'), async (req, inner) => {
    const firstTurn = !req.messages.some((m) => m.role === 'assistant');
    if (firstTurn) attempts += 1;
    const asked = req.messages.find((m) => m.role === 'assistant' && m.tool_calls?.some((c) => c.arguments === SLOW_GREP));
    if (firstTurn && attempts <= slowAttempts) {
      return { content: '', toolCalls: [{ id: `slow-${attempts}`, name: 'grep', arguments: SLOW_GREP }], stopReason: 'tool_calls', usage: { inputTokens: 1, outputTokens: 1 }, model: 'test:slow-grep' };
    }
    if (asked !== undefined) {
      return { content: '# Nothing found\n\nThe search was cut short.\n', toolCalls: [], stopReason: 'stop', usage: { inputTokens: 1, outputTokens: 1 }, model: 'test:slow-grep' };
    }
    return inner.complete(req);
  });
  return { provider, attempts: () => attempts };
}

/** The value of a counter without labels in the daemon's `GET /metrics`. */
async function counter(name: string): Promise<number> {
  const body = await new Promise<string>((resolve, reject) => {
    const req = request({ socketPath: d!.daemon.socketPath, path: '/metrics', method: 'GET' }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => (res.statusCode === 200 ? resolve(text) : reject(new Error(`/metrics answered ${String(res.statusCode)}`))));
    });
    req.on('error', reject);
    req.end();
  });
  const line = new RegExp(`^${name} (\\d+)$`, 'm').exec(body);
  if (line === null) throw new Error(`${name} is not in /metrics`);
  return Number(line[1]);
}

async function attemptsOf(taskId: string): Promise<Array<{ name: string; status: string; code: string | undefined }>> {
  return (await d!.daemon.store.listAttempts(taskId))
    .map((a) => ({ name: `${a.stage}#${a.attempt}`, status: a.status, code: a.detail ? (JSON.parse(a.detail) as { error?: { code?: string } }).error?.code : undefined }))
    .sort((x, y) => x.name.localeCompare(y.name));
}

function writeSlowFile(repo: string): void {
  // A line V8 backtracks on exponentially for `^(a+)+$`: far past both watchdogs.
  writeFileSync(join(repo, SLOW_FILE), `${'a'.repeat(48)}b\n`, { mode: 0o644 });
}

describeWithBwrap('fusion workflow e2e: an inconclusive replay is retried once', () => {
  it('retries the candidate once as a new attempt; the fresh attempt completes the task', async () => {
    const slow = cutThenBuiltin(1);
    d = await startE2EDaemon({ roster: builtinRoster({ candidates: { 1: slow.provider } }) });
    writeSlowFile(d.repo);
    const before = await counter('fusion_replay_inconclusive_total');
    const { taskId } = await d.submit();
    const task = await d.waitTerminal(taskId, 150_000);
    expect(task.error).toBeNull();
    expect(task.state).toBe('completed');
    expect(slow.attempts()).toBe(2);

    // The inconclusive attempt is in the audit as its own failed attempt; the retry succeeded.
    const attempts = await attemptsOf(taskId);
    expect(attempts.filter((a) => a.name.startsWith('candidate-'))).toEqual([
      { name: 'candidate-1#1', status: 'failed', code: 'replay_inconclusive' },
      { name: 'candidate-1#2', status: 'succeeded', code: undefined },
      { name: 'candidate-2#1', status: 'succeeded', code: undefined },
      { name: 'candidate-3#1', status: 'succeeded', code: undefined },
    ]);
    // Its replay record shows why: the grep was cut on both sides, and the results differ.
    const record = JSON.parse(readFileSync(join(d.home, 'tasks', taskId, 'replay', 'candidate-1.attempt-1.json'), 'utf8')) as { calls: Array<Record<string, unknown>> };
    expect(record.calls).toHaveLength(1);
    expect(record.calls[0]).toMatchObject({ tool_name: 'grep', arguments: SLOW_GREP, timer_cut: true, replayed_timer_cut: true });
    expect(record.calls[0]!.result_sha256).not.toBe(record.calls[0]!.replayed_sha256);
    expect(existsSync(join(d.home, 'tasks', taskId, 'replay', 'candidate-1.attempt-2.json'))).toBe(true);

    // The result names the attempt that succeeded, never the inconclusive one.
    const metadata = JSON.parse(readFileSync(join(d.home, 'tasks', taskId, 'result', 'metadata.json'), 'utf8')) as { attempts: Array<{ stage: string; attempt: number }> };
    expect(metadata.attempts.filter((a) => a.stage === 'candidate-1').map((a) => a.attempt)).toEqual([2]);
    expect(d.logs.lines().some((l) => l.msg === 'candidate attempt failed; retrying the candidate once' && l.slot === 1 && l.reason === 'replay_inconclusive')).toBe(true);
    expect(await counter('fusion_replay_inconclusive_total')).toBe(before + 1);
    // The sealed task tarball holds both attempts and their replay records, and verifies offline.
    const sealed = await waitFor('the sealed task tarball', async () => (await d!.daemon.store.getTaskTarball(taskId)) ?? undefined);
    const names = readMembers(sealed.data).map((m) => m.name);
    for (const member of ['attempts/candidate-1.attempt-1.replay.json', 'attempts/candidate-1.attempt-2.replay.json', 'attempts/candidate-1.attempt-1/candidate-1.attempt-1.tool-calls.jsonl']) {
      expect(names).toContain(member);
    }
    const report = await verifyTaskTarball(sealed.data);
    expect(report.failure).toBeUndefined();
    expect(report.ok).toBe(true);
    expect(ourSandboxProcesses()).toEqual([]);
  });

  it('a second inconclusive attempt fails the run with replay_inconclusive; no third attempt', async () => {
    const slow = cutThenBuiltin(Infinity);
    d = await startE2EDaemon({ roster: builtinRoster({ candidates: { 1: slow.provider } }) });
    writeSlowFile(d.repo);
    const before = await counter('fusion_replay_inconclusive_total');
    const { taskId } = await d.submit();
    const task = await d.waitTerminal(taskId, 150_000);
    expect(task.state).toBe('failed');
    expect(task.error.code).toBe('replay_inconclusive');
    expect(task.error.state).toBe('candidates_running');
    expect(slow.attempts()).toBe(2);
    const candidate1 = (await attemptsOf(taskId)).filter((a) => a.name.startsWith('candidate-1#'));
    expect(candidate1).toEqual([
      { name: 'candidate-1#1', status: 'failed', code: 'replay_inconclusive' },
      { name: 'candidate-1#2', status: 'failed', code: 'replay_inconclusive' },
    ]);
    // Never 2-of-3: no candidate checkpoint, no evaluator, no result.
    expect(await d.daemon.store.getCheckpoint(taskId, 'candidates')).toBeNull();
    expect((await attemptsOf(taskId)).some((a) => a.name.startsWith('evaluator'))).toBe(false);
    expect(await d.daemon.store.getResult(taskId)).toBeNull();
    expect(await counter('fusion_replay_inconclusive_total')).toBe(before + 2);
    expect(ourSandboxProcesses()).toEqual([]);
  });
});
