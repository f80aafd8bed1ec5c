/**
 * Two clusters on one Redis (docs/operations.md#research-queue-name): with
 * `--research-queue-prefix cluster` the research queue lives under each research database's
 * cluster prefix (`fusion-<cluster id>`), so a daemon never takes a research job of another
 * cluster (whose run its database does not hold). With the default prefix the queue is the
 * BullMQ default `bull:research-runs` (docs/behaviour.md#g5), and a second research database on it is refused at start.
 * Real redis-server, queue dispatchers in this process with recording executors.
 */
import { afterAll, beforeAll, expect, it, describe } from 'vitest';
import { createQueueDispatcher } from '../../../src/research/queue-dispatch.js';
import type { RunExecutor } from '../../../src/research/run-executor.js';
import type { ResearchRunStore } from '../../../src/store/research-port.js';
import type { ResearchRunRecord } from '../../../src/store/research-port.js';
import type { ResearchDispatcher } from '../../../src/research/dispatch.js';
import { clusterQueuePrefix } from '../../../src/queue/bullmq-shared.js';
import { queueOwnerKey, researchQueuePrefix } from '../../../src/research/queue-dispatch.js';
import { silentLogger } from '../../../src/log.js';
import { redisAvailable, startRedis, type RedisProc } from './helpers.js';
import { waitFor } from '../../helpers/wait.js';

const RUNS = 20;
const withRedis = redisAvailable();

/** An executor that records the runs it was given (nothing else of it is used by the queue). */
function recordingExecutor(seen: string[]): RunExecutor {
  return {
    activeRuns: 0,
    execute: async (runId: string) => {
      seen.push(runId);
      return null;
    },
    abort: () => false,
    abortAll: () => undefined,
  } as unknown as RunExecutor;
}

describe.runIf(withRedis)('research queue: two clusters on one Redis', () => {
  let redis: RedisProc;
  const dispatchers: ResearchDispatcher[] = [];
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    for (const d of dispatchers) await d.close();
    await redis?.stop();
  });

  it('each cluster works only its own research jobs', async () => {
    const seen = { one: [] as string[], two: [] as string[] };
    const store = { failRun: () => Promise.resolve(null) } as unknown as ResearchRunStore;
    for (const [clusterId, runs] of [['c0ffee0000000001', seen.one], ['c0ffee0000000002', seen.two]] as const) {
      dispatchers.push(await createQueueDispatcher({ redisUrl: redis.url, clusterId, queuePrefix: 'cluster', store, executor: recordingExecutor(runs), log: silentLogger(), concurrency: 4 }));
    }
    const [one, two] = dispatchers as [ResearchDispatcher, ResearchDispatcher];
    const ids = { one: [] as string[], two: [] as string[] };
    for (let i = 0; i < RUNS; i++) {
      for (const [name, d] of [['one', one], ['two', two]] as const) {
        const id = `research_${name}_${i}`;
        ids[name].push(id);
        await d.dispatch({ id } as ResearchRunRecord);
      }
    }
    await waitFor(`${RUNS} runs taken by each worker`, () => seen.one.length >= RUNS && seen.two.length >= RUNS, 20_000, 50);
    // Both workers polled the whole time: without the prefix about half of each would cross over.
    expect(seen.one.sort()).toEqual(ids.one.sort());
    expect(seen.two.sort()).toEqual(ids.two.sort());
  });

  it('the prefix is the task queues\' one', () => {
    expect(clusterQueuePrefix('abc')).toBe('fusion-abc');
    expect(researchQueuePrefix('cluster', 'abc')).toBe('fusion-abc');
    expect(researchQueuePrefix('bull', 'abc')).toBe('bull');
  });

  it('by default the queue is bull:research-runs, owned by one research database; another is refused', async () => {
    const { Queue } = await import('bullmq');
    const seen: string[] = [];
    const store = { failRun: () => Promise.resolve(null) } as unknown as ResearchRunStore;
    const first = await createQueueDispatcher({ redisUrl: redis.url, clusterId: 'c0ffee00000000aa', store, executor: recordingExecutor(seen), log: silentLogger(), concurrency: 1 });
    dispatchers.push(first);
    // A second daemon of the same database shares the queue.
    dispatchers.push(await createQueueDispatcher({ redisUrl: redis.url, clusterId: 'c0ffee00000000aa', store, executor: recordingExecutor(seen), log: silentLogger(), concurrency: 1 }));
    await expect(createQueueDispatcher({ redisUrl: redis.url, clusterId: 'c0ffee00000000bb', store, executor: recordingExecutor([]), log: silentLogger(), concurrency: 1 })).rejects.toMatchObject({
      code: 'invalid_config',
      message: expect.stringContaining('the research queue bull:research-runs on this Redis belongs to another research database (cluster c0ffee00000000aa); give this daemon --research-queue-prefix cluster'),
    });
    // A BullMQ tool that knows only the default name finds the job there.
    const defaultQueue = new Queue('research-runs', { connection: { url: redis.url } });
    try {
      await first.dispatch({ id: 'research_defaultname' } as ResearchRunRecord);
      await waitFor('the job dispatched under the default name to run', () => seen.includes('research_defaultname'), 10_000, 50);
      expect(seen).toContain('research_defaultname');
      expect(await defaultQueue.getJob('research_defaultname')).toBeDefined();
      const client = await defaultQueue.client;
      expect(await client.get(queueOwnerKey('bull'))).toBe('c0ffee00000000aa');
    } finally {
      await defaultQueue.close();
    }
  });
});
