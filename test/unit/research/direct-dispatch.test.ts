/**
 * Direct dispatch fairness: one workspace cannot occupy the daemon with unbounded parallel runs
 * (each executes inside its create request and shares the guard's extraction workers).
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { RESEARCH_LIMIT_DEFAULTS } from '../../../src/contracts/research-limits.js';
import { createMemoryResearchStore } from '../../../src/store/research-memory-store.js';
import { RunExecutor } from '../../../src/research/run-executor.js';
import { createDirectResearchDispatcher, DIRECT_RUNS_PER_WORKSPACE } from '../../../src/research/dispatch.js';
import type { Crawler, CrawlOutcome } from '../../../src/research/crawl/port.js';
import type { ResearchRunStore } from '../../../src/store/research-port.js';

interface Gate {
  crawling: Set<string>;
  started: string[];
  release(runId: string): void;
}

/** A crawler whose crawls block until released (or aborted). */
function gatedCrawler(): Crawler & Gate {
  const crawling = new Set<string>();
  const started: string[] = [];
  const waiters = new Map<string, () => void>();
  return {
    userAgent: 'TestBot',
    crawling,
    started,
    release(runId) {
      waiters.get(runId)?.();
    },
    async crawl(request, signal): Promise<CrawlOutcome> {
      crawling.add(request.runId);
      started.push(request.runId);
      try {
        await new Promise<void>((resolve, reject) => {
          waiters.set(request.runId, resolve);
          signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
        });
      } finally {
        crawling.delete(request.runId);
      }
      return { snapshots: [], skipped: [], robots: [], userAgent: 'TestBot' };
    },
  };
}

async function createClaimed(store: ResearchRunStore, workspaceId: string, id: string) {
  const { run } = await store.createRun(
    { id, workspaceId, idempotencyKey: id, payloadSha256: 'x', query: 'q', sourceUrls: ['http://a.test/'], limits: { ...RESEARCH_LIMIT_DEFAULTS } },
    'TestBot',
  );
  return run;
}

const tick = (ms = 20): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function setUp() {
  const store = createMemoryResearchStore();
  const crawler = gatedCrawler();
  const executor = new RunExecutor({ store, crawler, buildDocument: () => ({ name: 'd.md', content: 'c' }), log: silentLogger(), cancelPollMs: 10_000 });
  const dispatcher = createDirectResearchDispatcher(executor);
  return { store, crawler, executor, dispatcher };
}

describe('direct research dispatch', () => {
  it('one workspace runs at most DIRECT_RUNS_PER_WORKSPACE crawls at once and does not hold up another workspace', async () => {
    const { store, crawler, dispatcher } = setUp();
    const flood = await Promise.all(Array.from({ length: 6 }, (_, i) => createClaimed(store, 'ws_a', `research_a${String(i)}`)));
    const floodDone = flood.map((run) => dispatcher.dispatch(run));
    await tick();
    expect(crawler.crawling.size).toBe(DIRECT_RUNS_PER_WORKSPACE);

    const other = await createClaimed(store, 'ws_b', 'research_b0');
    const otherDone = dispatcher.dispatch(other);
    await tick();
    expect(crawler.crawling.has('research_b0')).toBe(true);
    crawler.release('research_b0');
    const b = await otherDone;
    expect(b.run?.status).toBe('succeeded');

    // The flood drains in arrival order, never more than the bound at once.
    for (const run of flood) {
      await tick();
      expect(crawler.crawling.size).toBeLessThanOrEqual(DIRECT_RUNS_PER_WORKSPACE);
      crawler.release(run.id);
    }
    const ended = await Promise.all(floodDone);
    expect(ended.map((e) => e.run?.status)).toEqual(flood.map(() => 'succeeded'));
    expect(crawler.started.filter((id) => id.startsWith('research_a'))).toEqual(flood.map((r) => r.id));
  });

  it('a run canceled while it waited for a slot never starts crawling', async () => {
    const { store, crawler, dispatcher } = setUp();
    const runs = await Promise.all(Array.from({ length: DIRECT_RUNS_PER_WORKSPACE + 1 }, (_, i) => createClaimed(store, 'ws_a', `research_c${String(i)}`)));
    const done = runs.map((run) => dispatcher.dispatch(run));
    await tick();
    const waiting = runs[DIRECT_RUNS_PER_WORKSPACE]!;
    expect(crawler.crawling.has(waiting.id)).toBe(false);
    await store.cancelRun(waiting.id);
    await dispatcher.cancel(waiting.id);
    for (const run of runs.slice(0, DIRECT_RUNS_PER_WORKSPACE)) crawler.release(run.id);
    const last = await done[DIRECT_RUNS_PER_WORKSPACE]!;
    expect(last.run?.status).toBe('canceled');
    expect(crawler.started).not.toContain(waiting.id);
    await Promise.all(done);
  });

  it('close fails the runs still waiting for a slot without crawling them', async () => {
    const { store, crawler, dispatcher } = setUp();
    const runs = await Promise.all(Array.from({ length: DIRECT_RUNS_PER_WORKSPACE + 2 }, (_, i) => createClaimed(store, 'ws_a', `research_d${String(i)}`)));
    const done = runs.map((run) => dispatcher.dispatch(run).then(() => 'ok', () => 'rejected'));
    await tick();
    await dispatcher.close();
    expect(await Promise.all(done)).toEqual(runs.map(() => 'rejected'));
    for (const run of runs) expect((await store.getRun(run.id))?.status).toBe('failed');
    expect(crawler.started).toEqual(runs.slice(0, DIRECT_RUNS_PER_WORKSPACE).map((r) => r.id));
  });
});
