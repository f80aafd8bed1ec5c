/**
 * The research API with the real crawl engine, direct and through BullMQ: a loopback source
 * fails the run (202, then failed with the egress error), and a crawl over two local sites
 * (a.test on 127.0.0.2, b.test on 127.0.0.3, reached only through the guard's seams) succeeds
 * with snapshots and a document that links each snapshot by canonical URL, both beginning with
 * the untrusted-content caution; the configured User-Agent is recorded and is what the sites saw.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNTRUSTED_CAUTION } from '../../../src/contracts/research-limits.js';
import { html, IP_A, IP_B, startSite, type Site } from '../research-crawl/site.js';
import { api, createKey, pollRun, redisAvailable, startRedis, startResearchDaemon, TERMINAL, type RedisProc, type ResearchDaemon } from './helpers.js';

const modes: Array<'direct' | 'queue'> = redisAvailable() ? ['direct', 'queue'] : ['direct'];
let a: Site;
let b: Site;
let redis: RedisProc | undefined;

beforeAll(async () => {
  a = await startSite('a.test', IP_A);
  b = await startSite('b.test', IP_B);
  if (modes.includes('queue')) redis = await startRedis();
});
afterAll(async () => {
  await a?.origin.close();
  await b?.origin.close();
  await redis?.stop();
});

describe.each(modes)('research runs with the real crawler (%s dispatch)', (mode) => {
  let d: ResearchDaemon;
  let key: string;

  beforeAll(async () => {
    d = await startResearchDaemon({
      realCrawler: true,
      ...(mode === 'queue' ? { redisUrl: redis!.url } : {}),
      config: {
        egressResolve: [`a.test:${IP_A}`, `b.test:${IP_B}`],
        egressAllowCidrs: [`${IP_A}/32`, `${IP_B}/32`],
        researchUserAgent: `FluxusResearchBot-test-${mode}`,
      },
    });
    key = await createKey(d.daemon.researchDbFile, 'ws_real');
  });
  afterAll(async () => {
    await d?.close();
  });

  it('a loopback source fails the run with the egress error (202 at create)', async () => {
    const r = await api(d.base, 'POST', '/api/v1/research', { key, idem: `loop-${mode}`, body: { query: 'q', sourceUrls: [`http://127.0.0.1:${a.origin.port}/`] } });
    expect(r.status).toBe(202);
    if (mode === 'direct') expect(r.body.run.status).toBe('failed');
    const run = await pollRun(d.base, key, r.body.run.id, TERMINAL);
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(/127\.0\.0\.1/);
    expect(a.requests.filter((u) => u === '/')).toHaveLength(0);
  });

  it('crawls the local sites and stores snapshots and a document linking them', async () => {
    const p = `/${mode}`;
    a.pages.set('/robots.txt', { type: 'text/plain', body: `User-agent: *\nDisallow: ${p}/private\n` });
    a.pages.set(`${p}/start`, { body: html('Start', 'Token buckets refill at a fixed rate.', [`${p}/next?b=2&a=1`, `${p}/next?a=1&b=2`, `${p}/private`, `http://b.test:${b.origin.port}${p}/other`]) });
    a.pages.set(`${p}/next?b=2&a=1`, { body: html('Next', 'The burst size is the capacity.') });
    a.pages.set(`${p}/next?a=1&b=2`, { body: html('Next', 'The burst size is the capacity.') });
    b.pages.set(`${p}/other`, { type: 'text/plain', body: 'Plain text from b.' });
    const r = await api(d.base, 'POST', '/api/v1/research', { key, idem: `crawl-${mode}`, body: { query: 'token buckets', sourceUrls: [a.url(`${p}/start`)], limits: { maxDepth: 1 } } });
    expect(r.status).toBe(202);
    const run = await pollRun(d.base, key, r.body.run.id, TERMINAL, 40_000);
    expect(run.status, run.error).toBe('succeeded');
    expect(run.userAgent).toBe(`FluxusResearchBot-test-${mode}`);
    const snaps = (await api(d.base, 'GET', `/api/v1/research/${run.id}/snapshots`, { key })).body.snapshots as Array<Record<string, any>>;
    const canon = snaps.map((s) => s.canonicalUrl).sort();
    expect(canon).toEqual([a.url(`${p}/next?a=1&b=2`), a.url(`${p}/start`), `http://b.test:${b.origin.port}${p}/other`].sort());
    for (const s of snaps) {
      expect(s.content.startsWith(UNTRUSTED_CAUTION)).toBe(true);
      expect(s.content).not.toContain('SCRIPT-TEXT');
      expect(s.sha256).toMatch(/^[0-9a-f]{64}$/);
    }
    // Only one of the two spellings of the same canonical URL was fetched; the disallowed page never.
    expect(a.requests.filter((u) => u.startsWith(`${p}/next`))).toHaveLength(1);
    expect(a.requests).not.toContain(`${p}/private`);
    const agents = a.origin.headers.filter((_, i) => a.requests[i]!.startsWith(`${p}/`)).map((h) => h['user-agent']);
    expect(agents.length).toBeGreaterThan(0);
    expect(new Set(agents)).toEqual(new Set([`FluxusResearchBot-test-${mode}`]));
    const doc = (await api(d.base, 'GET', `/api/v1/research/${run.id}/document`, { key })).body.document;
    expect(doc.content.startsWith(UNTRUSTED_CAUTION)).toBe(true);
    for (const c of canon) expect(doc.content).toContain(c);
    expect(doc).toMatchObject({ id: `research_document_${run.id}`, name: 'Research - token buckets.md', sourceUri: `research:${run.id}` });
    expect(run.crawl.robots.length).toBeGreaterThan(0);
  });
});
