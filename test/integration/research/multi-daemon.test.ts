/**
 * Several daemons on one Redis, as separate processes: they share the research database
 * (`--research-db`, one SQLite file; each daemon keeps its own data directory and socket) and
 * the BullMQ queue. Each run executes exactly once (counted at the origin: one request per run's
 * unique page), duplicate creates through both daemons make one run, and a daemon killed with
 * SIGKILL mid-run leaves its job to stall back to the queue (or, stopped with SIGTERM, fails the
 * attempt for a retry), where the other daemon re-claims the `running` run and finishes it. Lock and stalled intervals are shortened so that takes seconds.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../helpers/gates.js';
import { startFixtureDaemon, type Started } from '../../helpers/cli.js';
import { startHttpOrigin, type Listener } from '../egress/origin.js';
import { openResearchSqliteStore } from '../../../src/store/research-sqlite-store.js';
import { silentLogger } from '../../../src/log.js';
import { api, createKey, ORIGIN_HOST, pollRun, redisAvailable, startRedis, tempHome, TERMINAL, type RedisProc } from './helpers.js';

interface Proc {
  started: Started;
  base: string;
  stderr: () => string;
}

async function spawnDaemon(name: string, shared: string, redisUrl: string, env: Record<string, string> = {}): Promise<Proc> {
  const home = tempHome(`fusion-${name}-`);
  const { started, ready } = await startFixtureDaemon(join(ROOT, 'test', 'fixtures', 'research-daemon.mjs'), [home, join(home, 'fusion.sock'), join(shared, 'research.db')], {
    env: { REDIS_URL: redisUrl, EGRESS_RESOLVE: `${ORIGIN_HOST}:127.0.0.2`, LOCK_MS: '2000', STALLED_MS: '1000', ...env },
  });
  const port = /^READY \S+ (\d+)$/m.exec(ready[0])?.[1];
  if (port === undefined) throw new Error(`daemon ${name} gave no port: ${ready[0]}`);
  return { started, base: `http://127.0.0.1:${port}`, stderr: started.stderr };
}

async function stop(p: Proc | undefined, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  await p?.started.stop(signal);
}

const withRedis = redisAvailable();

describe.runIf(withRedis)('two daemons on one Redis and one research database', () => {
  let redis: RedisProc;
  let origin: Listener;
  let shared: string;
  let key: string;
  const procs: Proc[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    origin = await startHttpOrigin((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`page ${req.url ?? ''}`);
    });
    shared = tempHome('fusion-shared-');
    key = await createKey(join(shared, 'research.db'), 'ws_multi');
  });
  afterAll(async () => {
    for (const p of procs) await stop(p, 'SIGKILL');
    await origin?.close();
    await redis?.stop();
  });

  it('share the work: every run executes exactly once, and duplicate creates across daemons make one run', async () => {
    const a = await spawnDaemon('a', shared, redis.url);
    const b = await spawnDaemon('b', shared, redis.url);
    procs.push(a, b);
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        api((i % 2 === 0 ? a : b).base, 'POST', '/api/v1/research', { key, idem: `multi-${i}`, body: { query: `q${i}`, sourceUrls: [`http://${ORIGIN_HOST}:${origin.port}/run-${i}`] } }),
      ),
    );
    expect(replies.map((r) => r.status)).toEqual(Array(20).fill(202));
    for (const r of replies) expect((await pollRun(a.base, key, r.body.run.id, TERMINAL, 30_000)).status).toBe('succeeded');
    for (let i = 0; i < 20; i++) expect(origin.requests.filter((u) => u === `/run-${i}`), `/run-${i}`).toHaveLength(1);

    const dup = await Promise.all(
      Array.from({ length: 50 }, (_, i) => api((i % 2 === 0 ? a : b).base, 'POST', '/api/v1/research', { key, idem: 'multi-dup', body: { query: 'dup', sourceUrls: [`http://${ORIGIN_HOST}:${origin.port}/dup`] } })),
    );
    expect(dup.filter((r) => r.status === 202)).toHaveLength(1);
    expect(dup.filter((r) => r.status === 200)).toHaveLength(49);
    await pollRun(b.base, key, dup[0]!.body.run.id, TERMINAL, 30_000);
    expect(origin.requests.filter((u) => u === '/dup')).toHaveLength(1);
    await stop(a);
    await stop(b);
  });

  it.each(['SIGKILL', 'SIGTERM'] as const)('a daemon stopped with %s mid-run: the run finishes on the other daemon', async (signal) => {
    // Daemon a holds its crawl for a minute; daemon b crawls at once.
    const a = await spawnDaemon('slow', shared, redis.url, { CRAWL_DELAY_MS: '60000' });
    procs.push(a);
    const path = `/survivor-${signal}`;
    const created = await api(a.base, 'POST', '/api/v1/research', { key, idem: `killed-${signal}`, body: { query: 'survive', sourceUrls: [`http://${ORIGIN_HOST}:${origin.port}${path}`] } });
    expect(created.status).toBe(202);
    const id = created.body.run.id as string;
    await pollRun(a.base, key, id, (r) => r.status === 'running', 15_000);
    const b = await spawnDaemon('rescuer', shared, redis.url);
    procs.push(b);
    // SIGKILL: the job's lock expires and it stalls back to the queue. SIGTERM: the daemon aborts
    // its active run, the attempt fails and BullMQ retries it (backoff 1 s) on a live worker.
    await stop(a, signal);
    const started = Date.now();
    const run = await pollRun(b.base, key, id, TERMINAL, 30_000);
    expect(run.status).toBe('succeeded');
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(origin.requests.filter((u) => u === path)).toHaveLength(1);
    const store = await openResearchSqliteStore({ file: join(shared, 'research.db'), log: silentLogger() });
    try {
      expect((await store.getRun(id))?.claims).toBe(2);
    } finally {
      await store.close();
    }
    await stop(b);
  });

  // Last: it restarts the file's Redis.
  it('Redis killed and restarted empty: a queued run whose job was lost runs once, re-added by the reconciler', async () => {
    // One run at a time, each crawl held 3 s: the second run waits in the queue when Redis goes.
    const a = await spawnDaemon('lost', shared, redis.url, { CRAWL_DELAY_MS: '3000', RESEARCH_CONCURRENCY: '1', RECONCILE_MS: '1000' });
    procs.push(a);
    const paths = ['/lost-0', '/lost-1'];
    const ids: string[] = [];
    for (const [i, path] of paths.entries()) {
      const created = await api(a.base, 'POST', '/api/v1/research', { key, idem: `lost-${i}`, body: { query: 'lost', sourceUrls: [`http://${ORIGIN_HOST}:${origin.port}${path}`] } });
      expect(created.status).toBe(202);
      ids.push(created.body.run.id as string);
    }
    await pollRun(a.base, key, ids[0]!, (r) => r.status === 'running', 15_000);
    expect((await pollRun(a.base, key, ids[1]!, () => true, 1000)).status).toBe('queued');
    await redis.kill();
    await redis.resume();
    for (const id of ids) expect((await pollRun(a.base, key, id, TERMINAL, 30_000)).status).toBe('succeeded');
    for (const path of paths) expect(origin.requests.filter((u) => u === path), path).toHaveLength(1);
    expect(a.stderr()).toContain('its job was added again');
    await stop(a);
  });
});
