/**
 * Cluster mode acceptance (docs/operations.md#cluster-mode), real PostgreSQL and real Redis: two
 * daemons on one machine share one database and one queue; 12 builtin tasks are submitted to
 * the first, which is SIGKILLed mid-run. Every task ends terminal exactly once, nothing is lost,
 * no sandbox process is left, and every result read back through the survivor verifies.
 * Real bwrap sandboxes, builtin engine (test/fixtures/e2e/cluster-daemon.mjs).
 */
import { rmSync } from 'node:fs';
import { expect, it } from 'vitest';
import { FusionClient } from '../../../src/client/index.js';
import { openPgStore } from '../../../src/store/pg-store.js';
import { createLogger } from '../../../src/log.js';
import { REFILL_ARGS, copyFixtureRepo, describeWithBwrap, ourSandboxProcesses, waitFor } from '../workflow/helpers.js';
import { spawnClusterDaemon, useClusterEngines } from './helpers.js';

const TASKS = 12;
const engines = useClusterEngines();
const { cleanups } = engines;

describeWithBwrap('cluster: two daemons, one SIGKILLed mid-run', () => {
  it(`${TASKS} tasks submitted to the daemon that dies all end terminal once, served by the survivor`, async () => {
    if (!engines.ready) return;
    const databaseUrl = await engines.pg().createDatabase();
    const fixture = copyFixtureRepo();
    cleanups.push(() => rmSync(fixture.root, { recursive: true, force: true }));
    // A's first candidate of each task sleeps 4 s: A is surely mid-run when it is killed.
    const a = await spawnClusterDaemon('a', databaseUrl, engines.redisUrl(), 4000, cleanups);
    const b = await spawnClusterDaemon('b', databaseUrl, engines.redisUrl(), 0, cleanups);
    const viaA = new FusionClient(a.socket);
    const ids: string[] = [];
    for (let i = 0; i < TASKS; i++) {
      const receipt = (await viaA.call('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo: fixture.repo })) as { taskId: string };
      ids.push(receipt.taskId);
    }
    await waitFor('daemon a to be running a task', () => a.lines().some((l) => l.startsWith('ENTER ')), 60_000);
    a.proc.kill('SIGKILL');
    await a.exited;

    // Everything through the survivor: wait, status, result (verified by the daemon before delivery).
    const viaB = new FusionClient(b.socket);
    for (const id of ids) {
      const waited = (await viaB.call('GET', `/v1/tasks/${id}/wait?timeoutMs=150000`)) as { terminal: boolean; task: { state: string } };
      expect(waited.terminal, id).toBe(true);
      expect(waited.task.state, id).toBe('completed');
      const result = (await viaB.call('GET', `/v1/tasks/${id}/result`)) as { answer: { present: boolean; verified?: boolean; sha256?: string } };
      expect(result.answer.present, id).toBe(true);
      expect(result.answer.verified, id).toBe(true);
    }
    await waitFor('no sandbox process left', () => ourSandboxProcesses().length === 0, 15_000);

    const store = await openPgStore({ url: databaseUrl, log: createLogger({ level: 'silent' }), maxConnections: 2 });
    try {
      const ranBy = new Map<string, string[]>();
      for (const id of ids) {
        const events = await store.listEvents(id);
        expect(events.filter((e) => e.kind === 'terminal'), id).toHaveLength(1);
        const daemons = events.map((e) => e.data.daemon).filter((d): d is string => typeof d === 'string');
        ranBy.set(id, daemons);
        expect(daemons.length, id).toBeGreaterThan(0);
      }
      // At least one task was taken over by the survivor after its first daemon died.
      const resumed = [...ranBy.values()].filter((d) => d.includes('a') && d.at(-1) === 'b');
      expect(resumed.length).toBeGreaterThan(0);
      expect(await store.countTasksByState()).toEqual({ completed: TASKS });
    } finally {
      await store.close();
    }
  }, 300_000);
});
