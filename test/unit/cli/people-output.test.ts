/**
 * Output for people: the task table, the submit line (no agent instructions), the progress
 * lines with elapsed time and tool-call counts, the heartbeat when a task is silent, and the
 * spacing of the daemon's activity events.
 */
import { describe, expect, it } from 'vitest';
import { TaskProgress, formatDuration } from '../../../src/client/task-progress.js';
import { showProgress } from '../../../src/cli/progress.js';
import { submittedLines } from '../../../src/cli/output/receipt.js';
import { tasksTable } from '../../../src/cli/tasks-command.js';
import { activityReporter, ACTIVITY_EVENT_MS } from '../../../src/workflow/activity-progress.js';
import type { TaskEvent } from '../../../src/store/port.js';

const ID = `investigate-${'a'.repeat(32)}`;
const T0 = Date.parse('2026-01-01T10:00:00.000Z');
const at = (s: number): string => new Date(T0 + s * 1000).toISOString();
const ev = (seq: number, s: number, kind: TaskEvent['kind'], data: Record<string, unknown>): TaskEvent => ({ seq, taskId: ID, at: at(s), kind, data });

describe('task table', () => {
  it('one line per task: id, state (with the error code), age, duration, objective cut to the width, caller', () => {
    const now = T0 + 3_600_000;
    const out = tasksTable(
      [
        { taskId: ID, state: 'failed', status: 'failed', createdAt: at(0), updatedAt: at(65), objective: `Find where the token bucket refills ${'x'.repeat(200)}`, callerUid: 0, error: { code: 'child_failed' } },
        { taskId: `research-${'b'.repeat(32)}`, state: 'candidates_running', status: 'running', createdAt: at(3000), updatedAt: at(3000), objective: 'line\nbreak\u001b[2J', callerUid: null },
      ],
      now,
      140,
    );
    const lines = out.trimEnd().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^ID\s+STATE\s+AGE\s+DURATION\s+OBJECTIVE\s+CALLER$/u);
    expect(lines[1]).toMatch(new RegExp(`^${ID}  failed: child_failed\\s+1h00m ago\\s+1m05s\\s+Find where the token bucket refills x+…\\s+root$`, 'u'));
    expect(lines[2]).toContain('candidates_running');
    expect(lines[2]).toContain('10m00s+');
    // Caller text cannot move the cursor; newlines become spaces.
    expect(lines[2]).toContain('line break\\u001b[2J');
    for (const l of lines) expect([...l].length).toBeLessThanOrEqual(140);
    expect(tasksTable([], now, 80)).toBe('no tasks\n');
  });

  it('the state column names the error code only when it differs from the state (no "cancelled: cancelled")', () => {
    const now = T0 + 60_000;
    const row = (state: string, code: string) => ({ taskId: ID, state, status: state, createdAt: at(0), updatedAt: at(10), objective: 'o', callerUid: 0, error: { code } });
    const [, cancelled, failed] = tasksTable([row('cancelled', 'cancelled'), row('failed', 'sandbox_unavailable')], now, 140).trimEnd().split('\n');
    expect(cancelled).toMatch(new RegExp(`^${ID}  cancelled\\s+1m00s ago`, 'u'));
    expect(failed).toContain('failed: sandbox_unavailable');
  });

  it('durations read as people write them', () => {
    expect([formatDuration(0), formatDuration(59_999), formatDuration(65_000), formatDuration(2 * 3_600_000 + 180_000), formatDuration(50 * 3_600_000)]).toEqual(['0s', '59s', '1m05s', '2h03m', '2d02h']);
  });
});

describe('submit without --wait', () => {
  it('prints the id and how to follow it, not the agent instructions of the receipt', () => {
    const text = submittedLines({ taskId: ID, state: 'queued' });
    expect(text.split('\n')[0]).toBe(`Submitted ${ID} (queued); it runs in the daemon whether or not you follow it.`);
    expect(text).toContain(`fusion logs ${ID} --follow`);
    expect(text).toContain(`fusion result ${ID}`);
    expect(text).not.toMatch(/bg_result|Do not poll|notification/u);
  });
});

describe('progress lines', () => {
  it('state changes and candidate attempts carry the time since creation; tool-call counts show as they grow', () => {
    const p = new TaskProgress(ID, at(0));
    const lines = [
      ev(1, 1, 'transition', { from: 'initializing', to: 'queued' }),
      ev(2, 2, 'transition', { from: 'queued', to: 'candidates_running' }),
      ev(3, 3, 'progress', { stage: 'candidate-1', attempt: 1, event: 'started' }),
      ev(4, 40, 'progress', { stage: 'candidate-1', attempt: 1, event: 'activity', toolCalls: 12, modelRequests: 4 }),
      ev(5, 45, 'progress', { stage: 'candidate-1', attempt: 1, event: 'activity', toolCalls: 12, modelRequests: 5 }),
      ev(6, 90, 'progress', { stage: 'candidate-1', attempt: 1, event: 'succeeded', toolCalls: 20 }),
      ev(7, 95, 'terminal', { summary: 'Fusion investigate completed.' }),
    ].map((e) => p.update(e));
    expect(lines).toEqual([
      '[+1s] initializing → queued',
      '[+2s] queued → candidates_running',
      '[+3s]   candidate-1 attempt 1 started',
      '[+40s]   candidate-1: 12 tool calls so far',
      undefined,
      '[+1m30s]   candidate-1 attempt 1 succeeded (20 tool calls)',
      '[+1m35s] Fusion investigate completed.',
    ]);
  });

  it('under --wait the end line names the outcome and the code, not the message the result prints in full next', () => {
    const message = 'no sandbox backend is usable: docker: no access to Docker; bwrap: bubblewrap is installed but not usable';
    const terminal = ev(2, 3, 'terminal', { status: 'failed', error: { code: 'sandbox_unavailable', message }, summary: `fusion investigate failed: sandbox_unavailable: ${message.slice(0, 40)}` });
    const waiting = new TaskProgress(ID, at(0), { resultFollows: true });
    expect(waiting.update(terminal)).toBe('[+3s] failed (sandbox_unavailable)');
    expect(new TaskProgress(ID, at(0), { resultFollows: true }).update(ev(2, 3, 'terminal', { status: 'completed', error: null, summary: 'x' }))).toBe('[+3s] completed');
    // fusion logs keeps the daemon's summary.
    expect(new TaskProgress(ID, at(0)).update(terminal)).toContain('sandbox_unavailable: no sandbox');
  });

  it('a heartbeat says the task is alive, where it is, each candidate\'s calls and how long it has been quiet', () => {
    const p = new TaskProgress(ID, at(0));
    p.update(ev(1, 2, 'transition', { from: 'queued', to: 'candidates_running' }));
    p.update(ev(2, 3, 'progress', { stage: 'candidate-1', attempt: 1, event: 'started' }));
    p.update(ev(3, 30, 'progress', { stage: 'candidate-1', attempt: 1, event: 'activity', toolCalls: 7 }));
    p.update(ev(4, 31, 'progress', { stage: 'candidate-2', attempt: 1, event: 'failed', toolCalls: 2 }));
    expect(p.heartbeat(T0 + 200_000)).toBe('[+3m20s] still candidates_running — candidate-1 7 tool calls, candidate-2 2 tool calls (failed); last event 2m49s ago');
  });

  it('showProgress writes a heartbeat when the stream is silent for the period, and stops at its end', async () => {
    let release: () => void = () => undefined;
    const released = new Promise<void>((r) => (release = r));
    async function* events(): AsyncGenerator<TaskEvent> {
      yield ev(1, 0, 'transition', { from: 'queued', to: 'candidates_running' });
      await released;
      yield ev(2, 1, 'terminal', { summary: 'done' });
    }
    const lines: string[] = [];
    let sawHeartbeat: () => void = () => undefined;
    const heartbeatSeen = new Promise<void>((r) => (sawHeartbeat = r));
    const following = showProgress(events(), new TaskProgress(ID), (l) => {
      lines.push(l);
      if (l.includes('still candidates_running')) sawHeartbeat();
    }, 20);
    await heartbeatSeen;
    release();
    await following;
    expect(lines[0]).toBe('[+0s] queued → candidates_running');
    expect(lines.some((l) => /^\[\+[0-9dhms]+\] still candidates_running; last event [0-9dhms]+ ago$/u.test(l))).toBe(true);
    expect(lines.at(-1)).toBe('[+1s] done');
  });
});

describe('activity events from a running candidate', () => {
  it('are sent when the tool-call count changed, at most one per period', async () => {
    let now = 1_000_000;
    let calls = 0;
    const sent: Array<Record<string, unknown>> = [];
    const report = activityReporter(async (d) => void sent.push(d), () => ({ toolCalls: calls, modelRequests: 1 }), { stage: 'candidate-2', attempt: 1 }, () => now);
    report(); // nothing yet
    calls = 3;
    report();
    await Promise.resolve();
    calls = 4;
    now += ACTIVITY_EVENT_MS - 1;
    report(); // too soon
    now += 1;
    await Promise.resolve();
    report();
    expect(sent).toEqual([
      { stage: 'candidate-2', attempt: 1, event: 'activity', toolCalls: 3, modelRequests: 1 },
      { stage: 'candidate-2', attempt: 1, event: 'activity', toolCalls: 4, modelRequests: 1 },
    ]);
  });
});
