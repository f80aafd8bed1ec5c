/**
 * Cluster mode through the API (docs/operations.md#cluster-mode): two stub-workflow daemons share
 * a real PostgreSQL database and a real Redis. Any daemon answers for any task (status, wait,
 * events, result, cancel of a task running on the other daemon), and a daemon stopped with
 * SIGTERM hands its running task back to the queue, where the other daemon resumes it.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openPgStore } from '../../../src/store/pg-store.js';
import { silentLogger } from '../../../src/log.js';
import { postgresAvailable, startPostgres, type PostgresServer } from '../../setup/postgres-server.js';
import { redisAvailable, startRedis, type RedisProc } from '../research/helpers.js';
import { waitFor } from '../../helpers/wait.js';
import { INVESTIGATE_ARGS, ROOT, STARTED_RUNNING, startStubDaemon, stopDaemon, tempHome, waitForTask, type DaemonProc } from './helpers.js';

const ready = postgresAvailable() && redisAvailable();
// In cluster mode a receipt packs the repository into its bundle: a small tree, not the clone
// (its node_modules would be packed too, and is over the bundle cap).
const SMALL_REPO = join(ROOT, 'test', 'fixtures', 'e2e', 'repo');
let pgServer: PostgresServer | undefined;
let redis: RedisProc | undefined;
const daemons: DaemonProc[] = [];

beforeAll(async () => {
  if (!ready) return;
  pgServer = await startPostgres();
  redis = await startRedis();
});
/** Stops the daemons of the test that ends (they would keep taking CPU). */
async function stopAll(): Promise<void> {
  for (const d of daemons.splice(0)) {
    await stopDaemon(d);
    rmSync(d.home, { recursive: true, force: true });
  }
}
afterEach(stopAll);
afterAll(async () => {
  await stopAll();
  await redis?.stop();
  await pgServer?.stop();
});

async function clusterDaemon(id: string, databaseUrl: string, stageMs: number): Promise<DaemonProc> {
  const d = await startStubDaemon(tempHome(`fusion-cluster-${id}-`), stageMs, 0, {
    databaseUrl, redisUrl: redis!.url, daemonId: id, taskLeaseMs: 2000, taskStalledCheckMs: 1000,
  });
  daemons.push(d);
  return d;
}

const submit = async (d: DaemonProc): Promise<string> =>
  ((await d.client.call('POST', '/v1/tasks/investigate', { arguments: INVESTIGATE_ARGS, repo: SMALL_REPO })) as { taskId: string }).taskId;

async function eventsOf(d: DaemonProc, id: string): Promise<Array<{ kind: string; data: Record<string, unknown> }>> {
  const res = await fetchEvents(d, id);
  return res.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { kind: string; data: Record<string, unknown> });
}

/** NDJSON body of the events route (follow: until the terminal event). */
async function fetchEvents(d: DaemonProc, id: string, follow = false): Promise<string> {
  const { request } = await import('node:http');
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: d.socket, path: `/v1/tasks/${id}/events?follow=${follow ? 'true' : 'false'}`, method: 'GET' }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end();
  });
}

describe.runIf(ready)('cluster mode: any daemon answers', () => {
  it('submitted to one, followed, waited for and read back through the other', async () => {
    const databaseUrl = await pgServer!.createDatabase();
    const a = await clusterDaemon('a', databaseUrl, 100);
    const b = await clusterDaemon('b', databaseUrl, 100);
    const ids = [await submit(a), await submit(a), await submit(a), await submit(a)];
    // Events streamed from B while the task runs (wherever it runs) end with its terminal event.
    const followed = fetchEvents(b, ids[0]!, true);
    for (const id of ids) {
      const waited = (await b.client.call('GET', `/v1/tasks/${id}/wait?timeoutMs=60000`)) as { terminal: boolean; task: { state: string } };
      expect(waited.task.state).toBe('completed');
      const result = (await b.client.call('GET', `/v1/tasks/${id}/result`)) as { answer: { present: boolean; verified: boolean; text: string } };
      expect(result.answer).toMatchObject({ present: true, verified: true });
      expect(result.answer.text).toBe(`stub answer for ${id}\n`);
    }
    const streamed = (await followed).split('\n').filter(Boolean).map((l) => JSON.parse(l) as { kind: string });
    expect(streamed.at(-1)?.kind).toBe('terminal');
    // The two daemons shared the work: each task names the daemon that ran it.
    const ranBy = await Promise.all(ids.map(async (id) => (await eventsOf(a, id)).map((e) => e.data.daemon).find((x) => typeof x === 'string')));
    expect(ranBy.every((x) => x === 'a' || x === 'b')).toBe(true);
  });

  it('cancel through one daemon stops the run on the other', async () => {
    const databaseUrl = await pgServer!.createDatabase();
    const a = await clusterDaemon('a', databaseUrl, 3000);
    const b = await clusterDaemon('b', databaseUrl, 3000);
    const id = await submit(a);
    // Wait until some daemon runs it, then cancel through the daemon that does not.
    const runner = await waitFor('a daemon to run the task', async () => (await eventsOf(a, id)).map((e) => e.data.daemon).find((x): x is string => typeof x === 'string'), 20_000, 100);
    const other = runner === 'a' ? b : a;
    const cancelled = (await other.client.call('POST', `/v1/tasks/${id}/cancel`)) as { state: string };
    expect(cancelled.state).toBe('cancelled');
    // The run on the other daemon stopped at once (not at its next stage boundary, 3 s away).
    const running = runner === 'a' ? a : b;
    const health = async (): Promise<number> => ((await running.client.call('GET', '/v1/health')) as { queue: { running: number } }).queue.running;
    await waitFor('the cancelled run to stop on the daemon running it (at once, not at its next stage boundary)', async () => (await health()) === 0, 2_000, 50);
    // No transition after the cancel, one terminal event, still cancelled. The run has stopped,
    // so nothing is due to come; this window is where a transition written late would show.
    await new Promise((r) => setTimeout(r, 1000));
    const events = await eventsOf(other, id);
    expect(events.filter((e) => e.kind === 'terminal')).toHaveLength(1);
    expect(events.at(-1)?.kind).toBe('terminal');
    expect(((await other.client.call('GET', `/v1/tasks/${id}`)) as { state: string }).state).toBe('cancelled');
  });

  it('a daemon stopped with SIGTERM hands its running task back; the other resumes it once', async () => {
    const databaseUrl = await pgServer!.createDatabase();
    const a = await clusterDaemon('a', databaseUrl, 1500);
    const id = await submit(a);
    await waitForTask(a.client, id, 'to start running', STARTED_RUNNING, 20_000);
    const b = await clusterDaemon('b', databaseUrl, 50);
    expect(await stopDaemon(a)).toBe(0);
    const waited = (await b.client.call('GET', `/v1/tasks/${id}/wait?timeoutMs=60000`)) as { task: { state: string } };
    expect(waited.task.state).toBe('completed');
    const store = await openPgStore({ url: databaseUrl, log: silentLogger(), maxConnections: 1 });
    try {
      expect((await store.getTask(id))?.resumeCount).toBe(1);
      const events = await store.listEvents(id);
      expect(events.filter((e) => e.kind === 'terminal')).toHaveLength(1);
      expect(events.some((e) => e.data.recovery === 'resumed' && e.data.daemon === 'b')).toBe(true);
    } finally {
      await store.close();
    }
  });
});
