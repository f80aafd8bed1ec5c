/**
 * Cluster chaos (docs/operations.md#cluster-mode), real PostgreSQL, Redis and bwrap sandboxes:
 * two daemons share tasks while one shared engine fails mid-run.
 *
 * - Redis is SIGKILLed and started again empty (no persistence): the waiting jobs and the locks
 *   of the running ones are gone. The running tasks go on under their database leases; the
 *   reconciler re-adds the jobs of the others.
 * - PostgreSQL is stopped mid-run and started again: runs fail their writes meanwhile; the
 *   tasks resume from their last committed stage boundary.
 *
 * Each asserts: no acknowledged task lost (every receipt's task is in the store, and it
 * completed), none non-terminal 60 s after the fault ended, one terminal event per task, and
 * no stage run twice (at most one succeeded attempt per task and stage).
 */
import { rmSync } from 'node:fs';
import { expect, it } from 'vitest';
import { FusionClient } from '../../../src/client/index.js';
import { openPgStore, type PgStore } from '../../../src/store/pg-store.js';
import { createLogger } from '../../../src/log.js';
import { isTerminal } from '../../../src/contracts/task-state.js';
import { REFILL_ARGS, copyFixtureRepo, describeWithBwrap, ourSandboxProcesses, waitFor } from '../workflow/helpers.js';
import { spawnClusterDaemon, useClusterEngines, type ClusterDaemon } from './helpers.js';

const TASKS = 6;
/** The acceptance bound: every task terminal within this long after the fault ended. */
const AFTER_FAULT_MS = 60_000;
const engines = useClusterEngines();
const { cleanups } = engines;

/** Short reconcile passes so a lost job comes back in seconds; short leases as in the other cluster tests. */
const CHAOS_ENV = { FUSION_QUEUE_RECONCILE_MS: '2000' };

interface Cluster {
  databaseUrl: string;
  a: ClusterDaemon;
  b: ClusterDaemon;
  ids: string[];
}

/** Two daemons whose first candidate of each task sleeps, and TASKS tasks submitted to the first. */
async function startCluster(): Promise<Cluster> {
  const databaseUrl = await engines.pg().createDatabase();
  const fixture = copyFixtureRepo();
  cleanups.push(() => rmSync(fixture.root, { recursive: true, force: true }));
  const a = await spawnClusterDaemon('a', databaseUrl, engines.redisUrl(), 3000, cleanups, CHAOS_ENV);
  const b = await spawnClusterDaemon('b', databaseUrl, engines.redisUrl(), 3000, cleanups, CHAOS_ENV);
  const viaA = new FusionClient(a.socket);
  const ids: string[] = [];
  for (let i = 0; i < TASKS; i++) {
    const receipt = (await viaA.call('POST', '/v1/tasks/investigate', { arguments: REFILL_ARGS, repo: fixture.repo })) as { taskId: string };
    ids.push(receipt.taskId);
  }
  // Mid-run: some candidate sleeps in its sandbox (and, with 2 slots per daemon, some tasks wait).
  await waitFor('a task to be mid-run', () => [...a.lines(), ...b.lines()].some((l) => l.startsWith('ENTER ')), 60_000);
  return { databaseUrl, a, b, ids };
}

async function openStore(databaseUrl: string): Promise<PgStore> {
  const store = await openPgStore({ url: databaseUrl, log: createLogger({ level: 'silent' }), maxConnections: 2 });
  cleanups.push(() => store.close());
  return store;
}

/** Every acknowledged task terminal within AFTER_FAULT_MS of `faultEnded`; then the exactly-once checks. */
async function assertHealed(store: PgStore, ids: string[], faultEnded: number): Promise<void> {
  const states = new Map<string, string>();
  await waitFor(`all ${ids.length} tasks terminal within ${AFTER_FAULT_MS / 1000} s of the fault's end`, async () => {
    for (const id of ids) {
      const task = await store.getTask(id).catch(() => undefined);
      if (task) states.set(id, task.state);
    }
    return ids.every((id) => { const s = states.get(id); return s !== undefined && isTerminal(s as never); });
  }, Math.max(1, faultEnded + AFTER_FAULT_MS - Date.now()), 500);
  for (const id of ids) {
    const task = await store.getTask(id);
    // 0 lost: the receipt's task exists and completed (no task failed for want of a job or a write).
    expect(task?.state, `${id}: ${JSON.stringify(task?.error)}`).toBe('completed');
    const events = await store.listEvents(id);
    expect(events.filter((e) => e.kind === 'terminal'), id).toHaveLength(1);
    // 0 stages run twice: per task and stage, at most one attempt succeeded.
    const succeeded = new Map<string, number>();
    for (const at of await store.listAttempts(id)) if (at.status === 'succeeded') succeeded.set(at.stage, (succeeded.get(at.stage) ?? 0) + 1);
    expect([...succeeded].filter(([, n]) => n > 1), `${id}: stages that succeeded more than once`).toEqual([]);
  }
  await waitFor('no sandbox process left', () => ourSandboxProcesses().length === 0, 15_000);
}

describeWithBwrap('cluster chaos: a shared engine fails mid-run', () => {
  it(`Redis killed and restarted empty: all ${TASKS} tasks complete, each stage once`, async () => {
    if (!engines.ready) return;
    const { databaseUrl, a, b, ids } = await startCluster();
    const store = await openStore(databaseUrl);
    await engines.redis().kill();
    await engines.redis().resume();
    const faultEnded = Date.now();
    await assertHealed(store, ids, faultEnded);
    // No daemon restarted: the running ones healed the queue (the reconciler re-added lost jobs).
    expect(a.proc.exitCode === null && b.proc.exitCode === null).toBe(true);
    expect(a.log() + b.log()).toContain('its job was added again');
  }, 240_000);

  it(`PostgreSQL stopped mid-run and restarted: all ${TASKS} tasks complete, each stage once`, async () => {
    if (!engines.ready) return;
    const { databaseUrl, a, b, ids } = await startCluster();
    const store = await openStore(databaseUrl);
    await engines.pg().halt();
    // The outage itself (a scenario parameter, not a wait for state): long enough for the runs'
    // writes and the lease and LISTEN sessions to fail.
    await new Promise((r) => setTimeout(r, 5000));
    await engines.pg().resume();
    const faultEnded = Date.now();
    await assertHealed(store, ids, faultEnded);
    expect(a.proc.exitCode === null && b.proc.exitCode === null).toBe(true);
  }, 240_000);
});
