/**
 * A research run that collected no page (every URL skipped: robots.txt forbids all, every type
 * unsupported) ends `failed`, its error naming the skips, its crawl report kept
 * (docs/behaviour.md#g6). A run with one page still succeeds.
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { RESEARCH_LIMIT_DEFAULTS } from '../../../src/contracts/research-limits.js';
import { createMemoryResearchStore } from '../../../src/store/research-memory-store.js';
import { noPageMessage, NO_PAGE_SKIPS_NAMED, RunExecutor } from '../../../src/research/run-executor.js';
import type { Crawler, CrawlOutcome } from '../../../src/research/crawl/port.js';

function executorWith(outcome: CrawlOutcome) {
  const store = createMemoryResearchStore();
  const crawler: Crawler = { userAgent: 'TestBot', crawl: async () => outcome };
  const executor = new RunExecutor({ store, crawler, buildDocument: () => ({ name: 'd.md', content: 'c' }), log: silentLogger(), cancelPollMs: 10_000 });
  return { store, executor };
}

async function run(outcome: CrawlOutcome) {
  const { store, executor } = executorWith(outcome);
  await store.createRun({ id: 'research_x', workspaceId: 'ws', idempotencyKey: 'k', payloadSha256: 'x', query: 'q', sourceUrls: ['http://a.test/'], limits: { ...RESEARCH_LIMIT_DEFAULTS } });
  return { ended: await executor.execute('research_x', { reclaim: false, finalAttempt: true }), store };
}

const SKIPPED = [
  { url: 'http://a.test/', reason: 'disallowed by robots.txt (Disallow: /)' },
  { url: 'http://b.test/file.pdf', reason: 'unsupported_content_type: unsupported content type: Content-Type "application/pdf"' },
];

describe('a run that collected no page', () => {
  it('ends failed, naming every skip, with the crawl report kept and no document', async () => {
    const { ended, store } = await run({ snapshots: [], skipped: SKIPPED, robots: [{ host: 'http://a.test', outcome: 'ok' } as never], userAgent: 'TestBot' });
    expect(ended?.status).toBe('failed');
    expect(ended?.error).toBe(
      'The research run collected no page: every URL was skipped (2): http://a.test/: disallowed by robots.txt (Disallow: /); http://b.test/file.pdf: unsupported_content_type: unsupported content type: Content-Type "application/pdf".',
    );
    expect(ended?.resultDocumentId ?? null).toBeNull();
    expect(ended?.crawlReport?.skipped).toEqual(SKIPPED);
    expect(await store.getDocument('research_x')).toBeNull();
  });

  it('names at most a few skips and counts the rest (listed or omitted)', () => {
    const many = Array.from({ length: 8 }, (_, i) => ({ url: `http://a.test/${String(i)}`, reason: 'disallowed by robots.txt (Disallow: /)' }));
    const message = noPageMessage({ robots: [], skipped: many, skippedOmitted: 10 });
    expect(message.match(/http:\/\/a\.test\/\d/gu)).toHaveLength(NO_PAGE_SKIPS_NAMED);
    expect(message).toContain('every URL was skipped (18)');
    expect(message.endsWith('; and 13 more (see run.crawl).')).toBe(true);
  });

  it('a run with a page still succeeds', async () => {
    const page = { url: 'http://a.test/', canonicalUrl: 'http://a.test/', finalUrl: null, httpStatus: 200, contentType: 'text/html', bytes: 1, sha256: null, fetchedAt: new Date().toISOString(), content: 'x' };
    const { ended } = await run({ snapshots: [page], skipped: SKIPPED, robots: [], userAgent: 'TestBot' });
    expect(ended?.status).toBe('succeeded');
  });
});
