/**
 * The research crawl end to end over two loopback sites (a.test on 127.0.0.2, b.test on
 * 127.0.0.3) through the one guard's seams: robots.txt, breadth-first link following, every
 * limit, type filtering, duplicates, cautions, the User-Agent, policy refusals and cancellation.
 */
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildResearchDocument, createCrawler } from '../../../src/research/crawl/crawler.js';
import type { CrawlOutcome, CrawlRequest } from '../../../src/research/crawl/port.js';
import { MAX_CRAWL_URL_CHARS } from '../../../src/research/crawl/crawl-run.js';
import { RESEARCH_LIMIT_DEFAULTS, RESEARCH_USER_AGENT, UNTRUSTED_CAUTION, type ResearchLimits } from '../../../src/contracts/research-limits.js';
import { FusionError } from '../../../src/errors.js';
import { startOriginWithSentinel, type Listener } from '../egress/origin.js';
import { guardFor, html, IP_A, IP_B, startSite, type Guard, type Site } from './site.js';
import { waitFor } from '../../helpers/wait.js';

let a: Site;
let b: Site;
let guard: Guard;

beforeAll(async () => {
  a = await startSite('a.test', IP_A);
  b = await startSite('b.test', IP_B);
  guard = guardFor();
});

afterAll(async () => {
  await guard.fetch.close();
  await a.origin.close();
  await b.origin.close();
});

beforeEach(() => {
  for (const site of [a, b]) {
    site.pages.clear();
    site.requests.splice(0);
    site.origin.headers.splice(0);
    site.pages.set('/robots.txt', { type: 'text/plain', body: 'User-agent: *\nAllow: /\n' });
  }
});

function request(sourceUrls: string[], limits: Partial<ResearchLimits> = {}): CrawlRequest {
  return { runId: 'research_test', query: 'what do the pages say?', sourceUrls, limits: { ...RESEARCH_LIMIT_DEFAULTS, ...limits } };
}

function crawl(sourceUrls: string[], limits: Partial<ResearchLimits> = {}, signal = new AbortController().signal, userAgent?: string): Promise<CrawlOutcome> {
  const crawler = createCrawler({ log: guard.logs.log, fetch: guard.fetch, ...(userAgent === undefined ? {} : { userAgent }) });
  return crawler.crawl(request(sourceUrls, limits), signal);
}

async function rejection(promise: Promise<unknown>): Promise<FusionError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(FusionError);
    return err as FusionError;
  }
  throw new Error('expected the crawl to reject');
}

const pagesOf = (outcome: CrawlOutcome): string[] => outcome.snapshots.map((s) => new URL(s.canonicalUrl).pathname);
const skipFor = (outcome: CrawlOutcome, fragment: string): string | undefined => outcome.skipped.find((s) => s.url.includes(fragment))?.reason;

describe('breadth-first crawl', () => {
  it('follows links breadth-first across hosts, with cautions, without scripts, as FluxusResearchBot', async () => {
    a.pages.set('/', { body: html('Home', 'Welcome home.', ['/one', '/two', b.url('/three'), 'mailto:x@y.z', '#top']) });
    a.pages.set('/one', { body: html('One', 'First page.', ['/four']) });
    a.pages.set('/two', { type: 'text/plain', body: 'plain text page' });
    a.pages.set('/four', { body: html('Four', 'Deep page.') });
    b.pages.set('/three', { body: html('Three', 'Other host.', [a.url('/')]) });

    const outcome = await crawl([a.url('/')]);
    expect(pagesOf(outcome)).toEqual(['/', '/one', '/two', '/three', '/four']);
    expect(outcome.snapshots.map((s) => s.depth)).toEqual([0, 1, 1, 1, 2]);
    for (const snapshot of outcome.snapshots) {
      expect(snapshot.content?.startsWith(`${UNTRUSTED_CAUTION}\n\n`)).toBe(true);
      expect(snapshot.content).not.toContain('SCRIPT-TEXT');
      expect(snapshot.content).not.toContain('color:red');
      expect(snapshot.httpStatus).toBe(200);
      expect(snapshot.sha256).toMatch(/^[0-9a-f]{64}$/u);
    }
    expect(outcome.snapshots[0]?.content).toContain('Welcome home.');
    expect(outcome.snapshots[2]).toMatchObject({ contentType: 'text/plain', content: `${UNTRUSTED_CAUTION}\n\nplain text page` });
    expect(outcome.userAgent).toBe(RESEARCH_USER_AGENT);
    // robots.txt once per host, before its first page; every request carried the User-Agent.
    expect(a.requests).toEqual(['/robots.txt', '/', '/one', '/two', '/four']);
    expect(b.requests).toEqual(['/robots.txt', '/three']);
    for (const headers of [...a.origin.headers, ...b.origin.headers]) expect(headers['user-agent']).toBe(RESEARCH_USER_AGENT);
    expect(a.origin.headers[1]?.accept).not.toContain('markdown');
    expect(outcome.robots).toEqual([
      expect.objectContaining({ host: `http://a.test:${String(a.origin.port)}`, status: 'ok' }),
      expect.objectContaining({ host: `http://b.test:${String(b.origin.port)}`, status: 'ok' }),
    ]);
    // One decision line per page.
    const decisions = guard.logs.lines.filter((line) => line.msg === 'research page decision' && line.runId === 'research_test');
    expect(decisions.filter((line) => line.decision === 'collect')).toHaveLength(5);

    const document = buildResearchDocument({ id: 'research_test', query: 'what do the pages say?' }, outcome);
    expect(document.name).toBe('Research - what do the pages say?.md');
    expect(document.content.startsWith(UNTRUSTED_CAUTION)).toBe(true);
    for (const snapshot of outcome.snapshots) expect(document.content).toContain(`](<${snapshot.canonicalUrl}>)`);
    expect(document.content).not.toContain('SCRIPT-TEXT');
  });

  it('uses a configured User-Agent for robots.txt and pages, and records it', async () => {
    a.pages.set('/', { body: html('Home', 'x') });
    const outcome = await crawl([a.url('/')], {}, undefined, 'OtherBot/2.0');
    expect(outcome.userAgent).toBe('OtherBot/2.0');
    expect(a.origin.headers.map((h) => h['user-agent'])).toEqual(['OtherBot/2.0', 'OtherBot/2.0']);
  });
});

describe('robots.txt', () => {
  it('honours Disallow for our group (wildcards included): disallowed pages are never requested', async () => {
    a.pages.set('/robots.txt', {
      type: 'text/plain',
      body: 'User-agent: *\nDisallow: /\n\nUser-agent: FluxusResearchBot\nDisallow: /private\nDisallow: /*.pdf$\nAllow: /private/ok\n',
    });
    a.pages.set('/', { body: html('Home', 'x', ['/private/secret', '/private/ok', '/doc.pdf', '/doc.pdf.html', '/public']) });
    for (const path of ['/private/secret', '/private/ok', '/doc.pdf', '/doc.pdf.html', '/public']) a.pages.set(path, { body: html(path, 'page') });
    const outcome = await crawl([a.url('/')]);
    expect(pagesOf(outcome)).toEqual(['/', '/private/ok', '/doc.pdf.html', '/public']);
    expect(a.requests).not.toContain('/private/secret');
    expect(a.requests).not.toContain('/doc.pdf');
    expect(a.requests.filter((r) => r === '/robots.txt')).toHaveLength(1);
    expect(skipFor(outcome, '/private/secret')).toBe('disallowed by robots.txt (Disallow: /private)');
    expect(skipFor(outcome, '/doc.pdf')).toContain('disallowed by robots.txt');
  });

  it('a 404 robots.txt allows everything (missing)', async () => {
    a.pages.delete('/robots.txt');
    a.pages.set('/', { body: html('Home', 'x') });
    const outcome = await crawl([a.url('/')]);
    expect(pagesOf(outcome)).toEqual(['/']);
    expect(outcome.robots).toEqual([expect.objectContaining({ status: 'missing' })]);
  });

  it('a 500 robots.txt disallows the whole host (failed); other hosts still crawl', async () => {
    b.pages.set('/robots.txt', { status: 500, type: 'text/plain', body: 'oops' });
    b.pages.set('/page', { body: html('B', 'b') });
    a.pages.set('/', { body: html('Home', 'x', [b.url('/page')]) });
    const outcome = await crawl([a.url('/')]);
    expect(pagesOf(outcome)).toEqual(['/']);
    expect(b.requests).toEqual(['/robots.txt']);
    expect(outcome.robots.find((note) => note.host.includes('b.test'))).toMatchObject({ status: 'failed' });
    expect(skipFor(outcome, 'b.test')).toContain('robots.txt');
  });

  it('a run whose only host has an unreadable robots.txt rejects with that error; one disallowed everywhere resolves empty', async () => {
    a.pages.set('/robots.txt', { status: 503, type: 'text/plain', body: 'busy' });
    a.pages.set('/', { body: html('Home', 'x') });
    const err = await rejection(crawl([a.url('/')]));
    expect(err.code).toBe('http_error');
    expect(err.message).toContain('robots.txt of http://a.test:');
    expect(a.requests).toEqual(['/robots.txt']);
    a.pages.set('/robots.txt', { type: 'text/plain', body: 'User-agent: FluxusResearchBot\nDisallow: /\n' });
    const outcome = await crawl([a.url('/')]);
    expect(outcome.snapshots).toEqual([]);
    expect(skipFor(outcome, '/')).toBe('disallowed by robots.txt (Disallow: /)');
  });

  it('a mislabelled robots.txt is still read; a huge one is cut at 512 KiB, not failed', async () => {
    const filler = `# ${'x'.repeat(98)}\n`.repeat(6000); // 600 000 bytes of comments
    a.pages.set('/robots.txt', { type: 'application/octet-stream', body: `User-agent: *\nDisallow: /no\n${filler}Disallow: /\n` });
    a.pages.set('/', { body: html('Home', 'x', ['/no', '/yes']) });
    a.pages.set('/yes', { body: html('Yes', 'y') });
    const outcome = await crawl([a.url('/')]);
    // The final "Disallow: /" lies past the cut, so it does not apply.
    expect(pagesOf(outcome)).toEqual(['/', '/yes']);
    expect(outcome.robots[0]?.detail).toContain('cut');
  });
});

describe('limits', () => {
  it('maxDepth: links of a page at maxDepth are not followed', async () => {
    a.pages.set('/d0', { body: html('0', 'x', ['/d1']) });
    a.pages.set('/d1', { body: html('1', 'x', ['/d2']) });
    a.pages.set('/d2', { body: html('2', 'x', ['/d3']) });
    const outcome = await crawl([a.url('/d0')], { maxDepth: 1 });
    expect(pagesOf(outcome)).toEqual(['/d0', '/d1']);
    expect(a.requests).not.toContain('/d2');
    const zero = await crawl([a.url('/d0')], { maxDepth: 0 });
    expect(pagesOf(zero)).toEqual(['/d0']);
  });

  it('maxPages: at most that many snapshots; the rest of the queue is listed as not fetched', async () => {
    a.pages.set('/', { body: html('Home', 'x', ['/p1', '/p2', '/p3']) });
    for (const p of ['/p1', '/p2', '/p3']) a.pages.set(p, { body: html(p, 'x') });
    const outcome = await crawl([a.url('/')], { maxPages: 2 });
    expect(pagesOf(outcome)).toEqual(['/', '/p1']);
    expect(a.requests).not.toContain('/p2');
    expect(outcome.stoppedBy).toBe('maxPages (2) reached');
    expect(skipFor(outcome, '/p3')).toBe('not fetched: maxPages (2) reached');
  });

  it('a page with thousands of links queues at most ten times the requests a run may make', async () => {
    a.pages.set('/', { body: html('Home', 'x', Array.from({ length: 3000 }, (_, i) => `/l${String(i)}`)) });
    const outcome = await crawl([a.url('/')], { maxPages: 2 });
    expect(outcome.snapshots).toHaveLength(1); // every link 404s; the request bound (4) stops the crawl
    const listed = outcome.skipped.length + (outcome.skippedOmitted ?? 0);
    expect(listed).toBe(40);
    expect(a.requests).toHaveLength(1 + 4);
  });

  it('a link longer than MAX_CRAWL_URL_CHARS is skipped unrequested (robots.txt checks stay cheap)', async () => {
    const long = `/${'a'.repeat(MAX_CRAWL_URL_CHARS)}`;
    a.pages.set('/', { body: html('Home', 'x', [long, '/ok']) });
    a.pages.set('/ok', { body: html('Ok', 'y') });
    const outcome = await crawl([a.url('/')]);
    expect(pagesOf(outcome)).toEqual(['/', '/ok']);
    expect(outcome.skipped.find((s) => s.reason.startsWith('URL longer than'))?.reason).toBe(`URL longer than ${String(MAX_CRAWL_URL_CHARS)} characters: not crawled`);
    expect(a.requests.some((r) => r.length > MAX_CRAWL_URL_CHARS)).toBe(false);
  });

  it('robots.txt lookups are bounded like page requests: links to one host\'s many ports do not knock on each', async () => {
    // Closed ports on the site's own address: each robots.txt lookup fails (no page is fetched,
    // so none counted against the page request bound before).
    const ports: number[] = [];
    for (let i = 0; i < 12; i++) {
      const server = createNetServer();
      await new Promise<void>((resolve) => server.listen(0, IP_A, resolve));
      ports.push((server.address() as AddressInfo).port);
      await new Promise((resolve) => server.close(resolve));
    }
    a.pages.set('/', { body: html('Home', 'x', ports.map((port) => `http://${a.host}:${String(port)}/`)) });
    const outcome = await crawl([a.url('/')], { maxPages: 2 });
    expect(pagesOf(outcome)).toEqual(['/']);
    expect(outcome.robots.length).toBeLessThanOrEqual(4); // requestBound: twice maxPages
    expect(outcome.skipped.filter((s) => s.reason.startsWith('not fetched: robots.txt lookup bound (4 origins')).length).toBeGreaterThan(0);
  });

  it('maxDomains: a URL on one host too many is skipped and that host never contacted', async () => {
    a.pages.set('/', { body: html('Home', 'x', [b.url('/page'), '/local']) });
    a.pages.set('/local', { body: html('Local', 'x') });
    b.pages.set('/page', { body: html('B', 'b') });
    const before = b.origin.connections;
    const outcome = await crawl([a.url('/')], { maxDomains: 1 });
    expect(pagesOf(outcome)).toEqual(['/', '/local']);
    expect(b.origin.connections).toBe(before);
    expect(skipFor(outcome, 'b.test')).toBe('maxDomains (1) reached: host b.test is not crawled');
  });

  it('maxBytesPerPage: a larger page is skipped, the crawl goes on', async () => {
    a.pages.set('/', { body: html('Home', 'x', ['/big', '/small']) });
    a.pages.set('/big', { body: html('Big', 'y'.repeat(5000)) });
    a.pages.set('/small', { body: html('Small', 'z') });
    const outcome = await crawl([a.url('/')], { maxBytesPerPage: 2000 });
    expect(pagesOf(outcome)).toEqual(['/', '/small']);
    expect(skipFor(outcome, '/big')).toContain('larger than maxBytesPerPage (2000)');
    for (const snapshot of outcome.snapshots) expect(snapshot.bytes).toBeLessThanOrEqual(2000);
  });

  it('maxTotalBytes: the crawl stops when the next page would exceed the budget', async () => {
    const page = (name: string, links: string[] = []): string => html(name, 'w'.repeat(800), links);
    a.pages.set('/', { body: page('Home', ['/p1', '/p2', '/p3']) });
    for (const p of ['/p1', '/p2', '/p3']) a.pages.set(p, { body: page(p) });
    const size = Buffer.byteLength(page('/p1'));
    const outcome = await crawl([a.url('/')], { maxTotalBytes: size * 2 + 100 + Buffer.byteLength(page('Home', ['/p1', '/p2', '/p3'])) - size });
    expect(pagesOf(outcome)).toEqual(['/', '/p1']);
    expect(outcome.snapshots.reduce((sum, s) => sum + (s.bytes ?? 0), 0)).toBeLessThanOrEqual(size * 2 + 100 + Buffer.byteLength(page('Home', ['/p1', '/p2', '/p3'])) - size);
    expect(outcome.stoppedBy).toBe(`maxTotalBytes (${String(size * 2 + 100 + Buffer.byteLength(page('Home', ['/p1', '/p2', '/p3'])) - size)}) reached`);
    expect(a.requests).not.toContain('/p3');
  });

  it('maxDurationMs: at the deadline the crawl stops and returns what it collected', async () => {
    a.pages.set('/', { body: html('Home', 'x', ['/slow', '/after']) });
    a.pages.set('/slow', { body: html('Slow', 'x'), delayMs: 5000 });
    a.pages.set('/after', { body: html('After', 'x') });
    const started = Date.now();
    const outcome = await crawl([a.url('/')], { maxDurationMs: 700 });
    expect(Date.now() - started).toBeLessThan(3000);
    expect(pagesOf(outcome)).toEqual(['/']);
    expect(outcome.stoppedBy).toBe('maxDurationMs (700 ms) reached');
    expect(skipFor(outcome, '/slow')).toContain('maxDurationMs');
    expect(a.requests).not.toContain('/after');
  });

  it('maxDurationMs with nothing collected rejects with request_timeout', async () => {
    a.pages.set('/slow', { body: html('Slow', 'x'), delayMs: 5000 });
    const err = await rejection(crawl([a.url('/slow')], { maxDurationMs: 300 }));
    expect(err.code).toBe('request_timeout');
  });
});

describe('types and duplicates', () => {
  it('keeps text/html, XHTML and text/plain; skips Markdown, JSON and images with a reason', async () => {
    a.pages.set('/', { body: html('Home', 'x', ['/x', '/md', '/json', '/img']) });
    a.pages.set('/x', { type: 'application/xhtml+xml', body: '<html xmlns="http://www.w3.org/1999/xhtml"><body><p>xhtml</p></body></html>' });
    a.pages.set('/md', { type: 'text/markdown', body: '# md' });
    a.pages.set('/json', { type: 'application/json', body: '{}' });
    a.pages.set('/img', { type: 'image/png', body: Buffer.from([0x89, 0x50]) });
    const outcome = await crawl([a.url('/')]);
    expect(pagesOf(outcome)).toEqual(['/', '/x']);
    for (const path of ['/md', '/json', '/img']) expect(skipFor(outcome, path)).toMatch(/^unsupported_content_type: /u);
  });

  it('fetches a canonical URL once: query order, fragment and host case do not make a new page', async () => {
    a.pages.set('/p?a=1&b=2', { body: html('P', 'x', ['/p?b=2&a=1#frag', '/p?a=1&b=2', '/p?a=1&b=2#other']) });
    const port = String(a.origin.port);
    const outcome = await crawl([`http://A.TEST:${port}/p?b=2&a=1#top`, `http://a.test:${port}/p?a=1&b=2`]);
    expect(outcome.snapshots).toHaveLength(1);
    expect(outcome.snapshots[0]?.canonicalUrl).toBe(`http://a.test:${port}/p?a=1&b=2`);
    expect(a.requests).toEqual(['/robots.txt', '/p?a=1&b=2']);
    expect(skipFor(outcome, `http://a.test:${port}/p?a=1&b=2`)).toBe(`duplicate of http://a.test:${port}/p?a=1&b=2, already in this run`);
    expect(outcome.skipped.filter((s) => s.reason.startsWith('duplicate of')).length).toBeGreaterThanOrEqual(2);
  });
});

describe('redirects are followed by the crawl, through the same checks', () => {
  const redirect = (location: string, status = 302): { status: number; type: string; headers: Record<string, string> } => ({ status, type: 'text/plain', headers: { location } });

  it('a followed redirect keeps the URL the chain started from, with the target as finalUrl', async () => {
    a.pages.set('/old', redirect(b.url('/new'), 301));
    b.pages.set('/new', { body: html('New', 'moved here') });
    const outcome = await crawl([a.url('/old')]);
    expect(outcome.snapshots).toHaveLength(1);
    expect(outcome.snapshots[0]).toMatchObject({ url: a.url('/old'), canonicalUrl: a.url('/old'), finalUrl: b.url('/new'), httpStatus: 200 });
    expect(b.requests).toEqual(['/robots.txt', '/new']);
  });

  it("a redirect to a path the target's robots.txt disallows is never requested", async () => {
    a.pages.set('/robots.txt', { type: 'text/plain', body: 'User-agent: *\nDisallow: /private\n' });
    a.pages.set('/', { body: html('Home', 'x', ['/jump']) });
    a.pages.set('/jump', redirect('/private/page'));
    a.pages.set('/private/page', { body: html('Private', 'secret') });
    const outcome = await crawl([a.url('/')]);
    expect(pagesOf(outcome)).toEqual(['/']);
    expect(a.requests).not.toContain('/private/page');
    expect(skipFor(outcome, '/private/page')).toBe('disallowed by robots.txt (Disallow: /private)');
  });

  it('a redirect to another host counts toward maxDomains', async () => {
    a.pages.set('/', { body: html('Home', 'x', ['/away']) });
    a.pages.set('/away', redirect(b.url('/page')));
    const before = b.origin.connections;
    const outcome = await crawl([a.url('/')], { maxDomains: 1 });
    expect(pagesOf(outcome)).toEqual(['/']);
    expect(b.origin.connections).toBe(before);
    expect(skipFor(outcome, '/away')).toContain('maxDomains (1) reached, host b.test is not crawled');
  });

  it('a redirect to a page already in the run, a loop, and a chain over 5 are skipped', async () => {
    a.pages.set('/', { body: html('Home', 'x', ['/to-home', '/loop1', '/c6']) });
    a.pages.set('/to-home', redirect('/'));
    a.pages.set('/loop1', redirect('/loop2'));
    a.pages.set('/loop2', redirect('/loop1'));
    for (let i = 1; i <= 6; i++) a.pages.set(`/c${String(i)}`, redirect(`/c${String(i - 1)}`));
    a.pages.set('/c0', { body: html('End', 'end of chain') });
    const outcome = await crawl([a.url('/')]);
    expect(pagesOf(outcome)).toEqual(['/']);
    expect(skipFor(outcome, '/to-home')).toBe(`redirects (HTTP 302) to ${a.url('/')}, already in this run`);
    expect(skipFor(outcome, '/loop2')).toBe(`redirects (HTTP 302) to ${a.url('/loop1')}, already in this run`);
    expect(skipFor(outcome, '/c1')).toBe(`redirect_limit: more than 5 redirects from ${a.url('/c6')}`);
    expect(a.requests).not.toContain('/c0');
  });
});

describe('failures', () => {
  let sentinelPair: { origin: Listener; sentinel: Listener } | undefined;
  afterEach(async () => {
    if (sentinelPair !== undefined) {
      await sentinelPair.origin.close();
      await sentinelPair.sentinel.close();
      sentinelPair = undefined;
    }
  });

  it('a loopback source fails the run with blocked_address and nothing connects', async () => {
    sentinelPair = await startOriginWithSentinel((_req, res) => res.end('x'));
    const err = await rejection(crawl([a.url('/never'), `http://127.0.0.1:${String(sentinelPair.origin.port)}/`]));
    expect(err.code).toBe('blocked_address');
    expect(sentinelPair.sentinel.connections).toBe(0);
  });

  it('a source redirecting to loopback fails the run with redirect_blocked and nothing connects', async () => {
    sentinelPair = await startOriginWithSentinel((_req, res) => res.end('x'));
    a.pages.set('/to-loopback', { status: 302, type: 'text/plain', headers: { location: `http://127.0.0.1:${String(sentinelPair.origin.port)}/admin` } });
    const err = await rejection(crawl([a.url('/to-loopback')]));
    expect(err.code).toBe('redirect_blocked');
    expect(err.message).toContain(`redirect from ${a.url('/to-loopback')} blocked`);
    expect(sentinelPair.sentinel.connections).toBe(0);
  });

  it('a non-http(s) source fails with unsupported_scheme before any request', async () => {
    const err = await rejection(crawl([a.url('/'), 'ftp://a.test/file']));
    expect(err.code).toBe('unsupported_scheme');
    expect(a.requests).toEqual([]);
  });

  it('a link to a blocked address is skipped, not fatal', async () => {
    a.pages.set('/', { body: html('Home', 'x', ['http://127.0.0.1:9/admin']) });
    const outcome = await crawl([a.url('/')]);
    expect(pagesOf(outcome)).toEqual(['/']);
    expect(skipFor(outcome, '127.0.0.1')).toMatch(/^blocked_address: /u);
  });

  it('when no page is collected the run rejects with the first error', async () => {
    const err = await rejection(crawl([a.url('/missing')]));
    expect(err.code).toBe('http_error');
    expect(err.details.http_status).toBe(404);
  });

  it('a 404 among other pages is listed and the run succeeds', async () => {
    a.pages.set('/', { body: html('Home', 'x') });
    const outcome = await crawl([a.url('/missing'), a.url('/')]);
    expect(pagesOf(outcome)).toEqual(['/']);
    expect(skipFor(outcome, '/missing')).toMatch(/^http_error: origin answered HTTP 404/u);
  });

  it("the caller's abort rejects with cancelled", async () => {
    a.pages.set('/slow', { body: html('Slow', 'x'), delayMs: 5000 });
    const controller = new AbortController();
    // Aborted once the slow page was asked for: mid-crawl.
    void waitFor('the crawl to ask for /slow', () => a.requests.includes('/slow')).then(() => controller.abort());
    const started = Date.now();
    const err = await rejection(crawl([a.url('/slow')], {}, controller.signal));
    expect(err.code).toBe('cancelled');
    expect(Date.now() - started).toBeLessThan(3000);
    const already = new AbortController();
    already.abort();
    expect((await rejection(crawl([a.url('/')], {}, already.signal))).code).toBe('cancelled');
  });
});
