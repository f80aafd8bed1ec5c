/**
 * A single-host daemon's stop ends in time (docs/operations.md#restart-recovery): a run that
 * ignores its abort (a hung sandbox) cannot hold SIGTERM past `shutdownTimeoutS`. The daemon
 * exits 1 naming the task it abandoned, and the task resumes and completes at the next start.
 */
import { describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/wait.js';
import { INVESTIGATE_ARGS, ROOT, startStubDaemon, stopDaemon, tempHome } from './helpers.js';

type Json = Record<string, any>;
const DEADLINE_S = 2;

describe('shutdown deadline (single host)', () => {
  it('SIGTERM with a hung run: exit 1 within the deadline, the abandoned task logged, then resumed at the next start', async () => {
    const home = tempHome();
    const a = await startStubDaemon(home, 20, 0, { shutdownTimeoutS: DEADLINE_S }, { FUSION_STUB_HANG: '1' });
    const receipt = (await a.client.call('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: ROOT })) as Json;
    const hung = `HUNG ${String(receipt.taskId)}`;
    await waitFor(`the stub to print ${hung}`, () => a.stdout().includes(hung));
    const signalled = Date.now();
    const code = await stopDaemon(a, 'SIGTERM');
    const tookMs = Date.now() - signalled;
    expect(code).toBe(1);
    // The deadline, plus at most a second for the abandoned task's state and the exit.
    expect(tookMs).toBeGreaterThanOrEqual(DEADLINE_S * 1000 - 50);
    expect(tookMs).toBeLessThan((DEADLINE_S + 3) * 1000);
    const line = a.stderr().split('\n').find((l) => l.includes('shutdown deadline passed'));
    expect(line, a.stderr()).toBeDefined();
    const logged = JSON.parse(line!) as Json;
    expect(logged.abandoned).toEqual([{ taskId: receipt.taskId, state: 'candidates_running' }]);
    expect(logged.stuckAt).toBe('stopping task runs');

    const b = await startStubDaemon(home, 10);
    try {
      const w = (await b.client.call('GET', `/v1/tasks/${receipt.taskId}/wait?timeoutMs=20000`)) as Json;
      expect(w.task.state).toBe('completed');
      expect(w.task.resumeCount).toBe(1);
    } finally {
      expect(await stopDaemon(b)).toBe(0);
    }
  });
});
