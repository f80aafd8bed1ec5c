/**
 * Direct dispatch fairness: one workspace cannot occupy the daemon with unbounded parallel runs
 * (each executes inside its create request and shares the guard's extraction workers). And the
 * states of docs/behaviour.md#g6 in direct mode: a run waiting for a slot is `queued` (no
 * startedAt) until it starts; a waiting run's cancel ends its create at once.
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { RESEARCH_LIMIT_DEFAULTS } from '../../../src/contracts/research-limits.js';
import { createMemoryResearchStore } from '../../../src/store/research-memory-store.js';
import { RunExecutor } from '../../../src/research/run-executor.js';
import { createDirectResearchDispatcher, DIRECT_RUNS_PER_WORKSPACE } from '../../../src/research/dispatch.js';
import type { Crawler, CrawlOutcome } from '../../../src/research/crawl/port.js';
import type { ResearchRunStore } from '../../../src/store/research-port.js';
import { waitFor } from '../../helpers/wait.js';

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
      const page = { url: request.sourceUrls[0]!, canonicalUrl: request.sourceUrls[0]!, finalUrl: null, httpStatus: 200, contentType: 'text/plain', bytes: 1, sha256: null, fetchedAt: new Date().toISOString(), content: 'x' };
      return { snapshots: [page], skipped: [], robots: [], userAgent: 'TestBot' };
    },
  };
}

type Setup = ReturnType<typeof setUp>;

/** Creates a run the way the service does: through the dispatcher, claimed only when it starts at once. */
async function created({ store, dispatcher }: Pick<Setup, 'store' | 'dispatcher'>, workspaceId: string, id: string) {
  const { run } = await dispatcher.create(workspaceId, (claimAs) =>
    store.createRun({ id, workspaceId, idempotencyKey: id, payloadSha256: 'x', query: 'q', sourceUrls: ['http://a.test/'], limits: { ...RESEARCH_LIMIT_DEFAULTS } }, claimAs),
  );
  return run;
}

/** Creates and dispatches one after the other, as concurrent create requests do. */
async function createAll(setup: Setup, workspaceId: string, prefix: string, n: number) {
  const runs = [];
  const done = [];
  for (let i = 0; i < n; i++) {
    const run = await created(setup, workspaceId, `${prefix}${String(i)}`);
    runs.push(run);
    done.push(setup.dispatcher.dispatch(run));
  }
  return { runs, done };
}

/** Waits until the first `n` runs hold their slots (their crawls started). */
const slotsTaken = (crawler: Gate, n = DIRECT_RUNS_PER_WORKSPACE): Promise<boolean> => waitFor(`${String(n)} crawls to start`, () => crawler.crawling.size >= n, 5_000, 1);

function setUp(): { store: ResearchRunStore; crawler: Crawler & Gate; executor: RunExecutor; dispatcher: ReturnType<typeof createDirectResearchDispatcher> } {
  const store = createMemoryResearchStore();
  const crawler = gatedCrawler();
  const executor = new RunExecutor({ store, crawler, buildDocument: () => ({ name: 'd.md', content: 'c' }), log: silentLogger(), cancelPollMs: 10_000 });
  const dispatcher = createDirectResearchDispatcher(executor);
  return { store, crawler, executor, dispatcher };
}

describe('direct research dispatch', () => {
  it('one workspace runs at most DIRECT_RUNS_PER_WORKSPACE crawls at once and does not hold up another workspace', async () => {
    const setup = setUp();
    const { crawler } = setup;
    const { runs: flood, done: floodDone } = await createAll(setup, 'ws_a', 'research_a', 6);
    await slotsTaken(crawler);
    expect(crawler.crawling.size).toBe(DIRECT_RUNS_PER_WORKSPACE);

    const other = await created(setup, 'ws_b', 'research_b0');
    expect(other.status).toBe('running');
    const otherDone = setup.dispatcher.dispatch(other);
    await waitFor('the other workspace\'s crawl to start', () => crawler.crawling.has('research_b0'), 5_000, 1);
    crawler.release('research_b0');
    const b = await otherDone;
    expect(b.run?.status).toBe('succeeded');

    // The flood drains in arrival order, never more than the bound at once.
    for (const run of flood) {
      await waitFor(`${run.id} to start crawling`, () => crawler.crawling.has(run.id), 5_000, 1);
      expect(crawler.crawling.size).toBeLessThanOrEqual(DIRECT_RUNS_PER_WORKSPACE);
      crawler.release(run.id);
    }
    const ended = await Promise.all(floodDone);
    expect(ended.map((e) => e.run?.status)).toEqual(flood.map(() => 'succeeded'));
    expect(crawler.started.filter((id) => id.startsWith('research_a'))).toEqual(flood.map((r) => r.id));
  });

  it('a run waiting behind the cap is queued with no startedAt; it becomes running when it starts', async () => {
    const setup = setUp();
    const { store, crawler } = setup;
    const { runs, done } = await createAll(setup, 'ws_q', 'research_q', DIRECT_RUNS_PER_WORKSPACE + 1);
    await slotsTaken(crawler);
    const waiting = runs[DIRECT_RUNS_PER_WORKSPACE]!;
    for (const run of runs.slice(0, DIRECT_RUNS_PER_WORKSPACE)) expect(run).toMatchObject({ status: 'running', claims: 1 });
    expect(waiting).toMatchObject({ status: 'queued', startedAt: null, userAgent: null, claims: 0 });
    expect(await store.getRun(waiting.id)).toMatchObject({ status: 'queued', startedAt: null });
    crawler.release(runs[0]!.id);
    await done[0];
    // Handed the slot: claimed now, with its startedAt, and crawling.
    await waitFor('the waiting run to start crawling', () => crawler.crawling.has(waiting.id), 5_000, 1);
    const started = await store.getRun(waiting.id);
    expect(started).toMatchObject({ status: 'running', userAgent: 'TestBot', claims: 1 });
    expect(started?.startedAt).not.toBeNull();
    for (const run of runs.slice(1)) crawler.release(run.id);
    expect((await Promise.all(done)).map((d) => d.run?.status)).toEqual(runs.map(() => 'succeeded'));
  });

  it('a deduplicated create keeps no slot', async () => {
    const setup = setUp();
    const first = await created(setup, 'ws_d', 'research_dup');
    // The same id again: not created, and its slot is given back (the next run still starts at once).
    await created(setup, 'ws_d', 'research_dup');
    await created(setup, 'ws_d', 'research_dup');
    const second = await created(setup, 'ws_d', 'research_dup2');
    expect([first.status, second.status]).toEqual(['running', 'running']);
  });

  it('cancel of a waiting (queued) run: canceled at once, its create answers, it never starts', async () => {
    const setup = setUp();
    const { store, crawler, dispatcher } = setup;
    const { runs, done } = await createAll(setup, 'ws_a', 'research_c', DIRECT_RUNS_PER_WORKSPACE + 1);
    await slotsTaken(crawler);
    const waiting = runs[DIRECT_RUNS_PER_WORKSPACE]!;
    expect(waiting.status).toBe('queued');
    expect(crawler.crawling.has(waiting.id)).toBe(false);
    expect((await store.cancelRun(waiting.id))?.run.status).toBe('canceled');
    await dispatcher.cancel(waiting.id);
    // Its create request is answered without waiting for a slot.
    const last = await done[DIRECT_RUNS_PER_WORKSPACE]!;
    expect(last.run).toBeUndefined();
    expect((await store.getRun(waiting.id))?.status).toBe('canceled');
    expect(crawler.crawling.size).toBe(DIRECT_RUNS_PER_WORKSPACE);
    for (const run of runs.slice(0, DIRECT_RUNS_PER_WORKSPACE)) crawler.release(run.id);
    await Promise.all(done);
    expect(crawler.started).not.toContain(waiting.id);
  });

  it('close fails the runs still waiting for a slot without crawling them', async () => {
    const setup = setUp();
    const { store, crawler, dispatcher } = setup;
    const { runs, done } = await createAll(setup, 'ws_a', 'research_d', DIRECT_RUNS_PER_WORKSPACE + 2);
    const settled = done.map((d) => d.then((r) => r.run?.status ?? 'none', () => 'rejected'));
    await slotsTaken(crawler);
    await dispatcher.close();
    // The running ones were aborted (their create fails); the waiting ones end failed, never started.
    expect(await Promise.all(settled)).toEqual([...runs.slice(0, DIRECT_RUNS_PER_WORKSPACE).map(() => 'rejected'), 'failed', 'failed']);
    for (const run of runs) expect((await store.getRun(run.id))?.status).toBe('failed');
    expect((await store.getRun(runs.at(-1)!.id))?.error).toBe('The daemon shut down before the research run finished.');
    expect(crawler.started).toEqual(runs.slice(0, DIRECT_RUNS_PER_WORKSPACE).map((r) => r.id));
  });
});
