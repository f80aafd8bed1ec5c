/**
 * Two clusters on one Redis (docs/operations.md#cluster-mode): the research queue lives under
 * each research database's cluster prefix (`fusion-<cluster id>`), so a daemon never takes a
 * research job of another cluster (whose run its database does not hold). Real redis-server,
 * two queue dispatchers in this process with recording executors.
 */
import { afterAll, beforeAll, expect, it, describe } from 'vitest';
import { createQueueDispatcher } from '../../../src/research/queue-dispatch.js';
import type { RunExecutor } from '../../../src/research/run-executor.js';
import type { ResearchRunStore } from '../../../src/store/research-port.js';
import type { ResearchRunRecord } from '../../../src/store/research-port.js';
import type { ResearchDispatcher } from '../../../src/research/dispatch.js';
import { clusterQueuePrefix } from '../../../src/queue/bullmq-shared.js';
import { silentLogger } from '../../../src/log.js';
import { redisAvailable, startRedis, type RedisProc } from './helpers.js';

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
      dispatchers.push(await createQueueDispatcher({ redisUrl: redis.url, clusterId, store, executor: recordingExecutor(runs), log: silentLogger(), concurrency: 4 }));
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
    const deadline = Date.now() + 20_000;
    while ((seen.one.length < RUNS || seen.two.length < RUNS) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    // Both workers polled the whole time: without the prefix about half of each would cross over.
    expect(seen.one.sort()).toEqual(ids.one.sort());
    expect(seen.two.sort()).toEqual(ids.two.sort());
  });

  it('the prefix is the task queues\' one', () => {
    expect(clusterQueuePrefix('abc')).toBe('fusion-abc');
  });
});
