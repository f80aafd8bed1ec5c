/**
 * A run whose first source the egress policy refuses on its own (a private literal, a blocked
 * name) fails before its crawl sends anything. In direct mode it is created already failed: one
 * insert, no claim or failure write afterwards, and the record is the one the full execution
 * (insert → claim → crawl → fail) leaves, on every store (SQLite, PostgreSQL, memory).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { createMemoryResearchStore } from '../../../src/store/research-memory-store.js';
import type { ResearchRunRecord, ResearchRunStore } from '../../../src/store/research-port.js';
import { RunExecutor } from '../../../src/research/run-executor.js';
import { ResearchService } from '../../../src/research/research-service.js';
import { createDirectResearchDispatcher } from '../../../src/research/dispatch.js';
import { createCrawler } from '../../../src/research/crawl/crawler.js';
import { createGuardedFetch, type GuardedFetch } from '../../../src/egress/guarded-fetch.js';
import { normalisePayload } from '../../../src/contracts/research.js';
import { buildTestDocument } from '../../fixtures/research-test-crawler.mjs';
import { useStoreAdapters } from '../store/helpers.js';

const adapters = useStoreAdapters();
const stores: Array<[string, () => Promise<ResearchRunStore>]> = [
  ...adapters.map((a): [string, () => Promise<ResearchRunStore>] => [a.engine, async () => (await a.newDatabase()).openResearch()]),
  ['memory', async () => createMemoryResearchStore()],
];
const principal = { keyId: 'key_test', workspaceId: 'ws_1' };
// No resolver is ever consulted: every source here is refused (or passed) without DNS.
const noDns = (): Promise<never> => Promise.reject(new Error('the test resolves no name'));

/** The store, counting the writes after the insert. */
function counted(store: ResearchRunStore): ResearchRunStore & { later: string[] } {
  const later: string[] = [];
  return Object.assign(Object.create(store) as ResearchRunStore, {
    later,
    claimRun: (...args: Parameters<ResearchRunStore['claimRun']>) => (later.push('claimRun'), store.claimRun(...args)),
    failRun: (...args: Parameters<ResearchRunStore['failRun']>) => (later.push('failRun'), store.failRun(...args)),
    completeRun: (...args: Parameters<ResearchRunStore['completeRun']>) => (later.push('completeRun'), store.completeRun(...args)),
  });
}

/** The fields a run's outcome is judged by (ids, keys and times differ between runs). */
const outcomeOf = (run: ResearchRunRecord) => ({
  status: run.status, error: run.error, userAgent: run.userAgent, claims: run.claims, crawlReport: run.crawlReport,
  resultDocumentId: run.resultDocumentId, started: run.startedAt !== null, finished: run.finishedAt !== null,
});

describe.each(stores)('a source refused by policy alone, on the %s store', (_name, open) => {
  let store: ResearchRunStore | undefined;
  let fetch: GuardedFetch | undefined;
  afterEach(async () => {
    await store?.close();
    await fetch?.close();
  });

  it('creates the run failed in one write, the same run the full execution leaves; a duplicate create is deduplicated', async () => {
    store = await open();
    fetch = createGuardedFetch({ log: silentLogger(), resolve: noDns, extractWorkers: 1 });
    const crawler = createCrawler({ log: silentLogger(), fetch, userAgent: 'TestBot' });
    const writes = counted(store);
    const service = (c: typeof crawler) =>
      new ResearchService(writes, createDirectResearchDispatcher(new RunExecutor({ store: writes, crawler: c, buildDocument: buildTestDocument, log: silentLogger() })), silentLogger());

    for (const source of ['http://127.0.0.1:9/blocked', 'http://[::1]/', 'http://metadata.google.internal/x']) {
      const payload = normalisePayload({ query: 'q', sourceUrls: [source, 'https://example.test/'] });
      writes.later.length = 0;
      const early = await service(crawler).create(principal, `early ${source}`, payload);
      expect(early.deduplicated).toBe(false);
      expect(writes.later).toEqual([]); // no claim, no failure write: the insert was the only one
      // The same create through the full execution (a crawler that cannot tell in advance).
      const full = await service({ ...crawler, sourceRefusal: undefined }).create(principal, `full ${source}`, payload);
      expect(writes.later).toEqual(['failRun']);
      expect(early.run.status).toBe('failed');
      expect(early.run.error).toMatch(/^fetch host .* (is not a public address|is blocked)/);
      expect(outcomeOf(early.run)).toEqual(outcomeOf(full.run));
      expect(outcomeOf((await store.getRun(early.run.id))!)).toEqual(outcomeOf(full.run));
      expect(early.dispatch).toEqual(full.dispatch);

      const again = await service(crawler).create(principal, `early ${source}`, payload);
      expect(again.deduplicated).toBe(true);
      expect(again.run.id).toBe(early.run.id);
    }
  });

  it('a public first source is not refused in advance (its crawl decides), even when a later source is private', () => {
    fetch = createGuardedFetch({ log: silentLogger(), resolve: noDns, extractWorkers: 1 });
    const crawler = createCrawler({ log: silentLogger(), fetch, userAgent: 'TestBot' });
    expect(crawler.sourceRefusal?.(['https://example.test/', 'http://127.0.0.1/'])).toBeUndefined();
    expect(crawler.sourceRefusal?.(['http://10.0.0.1/'])?.code).toBe('blocked_address');
    // The guard's admin seam widens it in advance exactly as at fetch time.
    const widened = createGuardedFetch({ log: silentLogger(), resolve: noDns, extractWorkers: 1, allowCidrs: ['10.0.0.0/8'] });
    try {
      expect(createCrawler({ log: silentLogger(), fetch: widened }).sourceRefusal?.(['http://10.0.0.1/'])).toBeUndefined();
    } finally {
      void widened.close();
    }
  });
});
