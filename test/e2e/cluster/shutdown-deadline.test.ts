/**
 * A stop ends in time whatever the shared engines do (docs/operations.md#cluster-mode): a
 * cluster daemon mid-run loses both PostgreSQL and Redis, then gets SIGTERM. It exits within
 * its deadline (FUSION_SHUTDOWN_TIMEOUT_S) with status 1, naming the task it abandoned; once
 * the engines are back (Redis empty), a new daemon finishes that task.
 */
import { rmSync } from 'node:fs';
import { expect, it } from 'vitest';
import { FusionClient } from '../../../src/client/index.js';
import { openPgStore } from '../../../src/store/pg-store.js';
import { createLogger } from '../../../src/log.js';
import { REFILL_ARGS, copyFixtureRepo, describeWithBwrap, waitFor } from '../workflow/helpers.js';
import { spawnClusterDaemon, useClusterEngines } from './helpers.js';

const DEADLINE_S = 4;
const engines = useClusterEngines();
const { cleanups } = engines;

describeWithBwrap('cluster: shutdown with a deadline', () => {
  it('SIGTERM with PostgreSQL and Redis gone: exits 1 within the deadline, and the abandoned task completes later', async () => {
    if (!engines.ready) return;
    const databaseUrl = await engines.pg().createDatabase();
    const fixture = copyFixtureRepo();
    cleanups.push(() => rmSync(fixture.root, { recursive: true, force: true }));
    // Its first candidate sleeps a minute: the task is surely mid-run when the engines go.
    const a = await spawnClusterDaemon('a', databaseUrl, engines.redisUrl(), 60_000, cleanups, { FUSION_SHUTDOWN_TIMEOUT_S: String(DEADLINE_S) });
    const receipt = (await new FusionClient(a.socket).call('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo: fixture.repo })) as { taskId: string };
    await waitFor('the task to be mid-run', () => a.lines().includes(`ENTER ${receipt.taskId}`), 60_000);

    await engines.pg().halt();
    await engines.redis().kill();
    const signalled = Date.now();
    a.proc.kill('SIGTERM');
    await Promise.race([a.exited, new Promise((r) => setTimeout(r, (DEADLINE_S + 20) * 1000))]);
    const tookMs = Date.now() - signalled;
    expect(a.proc.exitCode, `still running ${tookMs} ms after SIGTERM`).not.toBeNull();
    // The deadline plus the bounded report (a store read of at most 1 s) and process exit.
    expect(tookMs).toBeLessThan((DEADLINE_S + 5) * 1000);
    expect(a.proc.exitCode).toBe(1);
    const abandoned = a.lines().find((l) => l.startsWith('ABANDONED '));
    expect(abandoned, a.log()).toBeDefined();
    const report = JSON.parse(abandoned!.slice('ABANDONED '.length)) as { abandonedTasks: Array<{ taskId: string }> };
    expect(report.abandonedTasks.map((t) => t.taskId), abandoned).toEqual([receipt.taskId]);

    // The engines come back (Redis empty: the job is gone); a new daemon resumes and finishes the task.
    await engines.pg().resume();
    await engines.redis().resume();
    const b = await spawnClusterDaemon('b', databaseUrl, engines.redisUrl(), 0, cleanups);
    const waited = (await new FusionClient(b.socket).call('GET', `/v1/tasks/${receipt.taskId}/wait?timeoutMs=90000`)) as { terminal: boolean; task: { state: string } };
    expect(waited.terminal).toBe(true);
    expect(waited.task.state).toBe('completed');
    const store = await openPgStore({ url: databaseUrl, log: createLogger({ level: 'silent' }), maxConnections: 2 });
    try {
      const events = await store.listEvents(receipt.taskId);
      expect(events.some((e) => e.data.recovery === 'resumed' && e.data.daemon === 'b')).toBe(true);
    } finally {
      await store.close();
    }
  }, 240_000);
});
