import { describe, expect, it } from 'vitest';
import { INVESTIGATE_ARGS, ROOT, STARTED_RUNNING, startStubDaemon, stopDaemon, tempHome, waitForTask } from './helpers.js';

type Json = Record<string, any>;

describe('restart recovery (kill -9)', () => {
  it('a task whose daemon was killed while it ran resumes and completes after restart', async () => {
    const home = tempHome();
    const first = await startStubDaemon(home, 1_500);
    const receipt = (await first.client.call('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: ROOT })) as Json;
    await waitForTask(first.client, receipt.taskId, 'to start running', STARTED_RUNNING);
    await stopDaemon(first, 'SIGKILL');
    const second = await startStubDaemon(home, 20);
    try {
      const w = (await second.client.call('GET', `/v1/tasks/${receipt.taskId}/wait?timeoutMs=20000`)) as Json;
      expect(w.terminal).toBe(true);
      expect(w.task.state).toBe('completed');
      expect(w.task.resumeCount).toBe(1);
      const r = (await second.client.call('GET', `/v1/tasks/${receipt.taskId}/result`)) as Json;
      expect(r.answer.text).toContain('(resumed)');
    } finally {
      await stopDaemon(second);
    }
  });

  it('a task killed again after its one resume ends failed with supervisor_restarted, and result says so', async () => {
    const home = tempHome();
    const a = await startStubDaemon(home, 3_000);
    const receipt = (await a.client.call('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: ROOT })) as Json;
    await waitForTask(a.client, receipt.taskId, 'to start running', STARTED_RUNNING);
    await stopDaemon(a, 'SIGKILL');
    const b = await startStubDaemon(home, 3_000);
    // The resumed run must be under way (its one resume used) before the second kill.
    await waitForTask(b.client, receipt.taskId, 'to be resumed', (t) => t.resumeCount >= 1);
    await stopDaemon(b, 'SIGKILL');
    const c = await startStubDaemon(home, 20);
    try {
      const status = (await c.client.call('GET', `/v1/tasks/${receipt.taskId}`)) as Json;
      expect(status.state).toBe('failed');
      expect(status.error.code).toBe('supervisor_restarted');
      expect(status.error.message).toMatch(/daemon restarted/);
      const r = (await c.client.call('GET', `/v1/tasks/${receipt.taskId}/result`)) as Json;
      expect(r).toMatchObject({ status: 'failed', answer: { present: false, reason: 'run_did_not_commit' } });
    } finally {
      await stopDaemon(c);
    }
  });

  it('SIGTERM shuts down gracefully and leaves running tasks for recovery', async () => {
    const home = tempHome();
    const a = await startStubDaemon(home, 1_000);
    const receipt = (await a.client.call('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: ROOT })) as Json;
    expect(await stopDaemon(a, 'SIGTERM')).toBe(0);
    const b = await startStubDaemon(home, 10);
    try {
      const w = (await b.client.call('GET', `/v1/tasks/${receipt.taskId}/wait?timeoutMs=20000`)) as Json;
      expect(w.task.state).toBe('completed');
    } finally {
      await stopDaemon(b);
    }
  });
});
