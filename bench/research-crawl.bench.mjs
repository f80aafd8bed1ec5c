/**
 * A research crawl of 20 local pages vs the same 20 fetches done by the guard alone (same
 * profile: text extraction and links, one after the other), in the same run, interleaved.
 * Goal: crawl wall time ≤ 1.2× the guard alone. The crawl's extra work is robots.txt (one
 * request per host), canonical URLs, robots matching and the queue.
 *
 * Also one full-size run: 20 pages of ~1 MiB (a 20 MiB run at the default limits), to show it
 * fits the run's 30 s limit.
 *
 * The origin listens on 127.0.0.2 and is reached as crawl.test through the guard's seams.
 * Run: node bench/run.mjs research-crawl (after a build). BENCH_SHORT=1: fewer rounds.
 */
import http from 'node:http';
import net from 'node:net';
import process from 'node:process';
import { Buffer } from 'node:buffer';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import { createGuardedFetch } from '../dist/src/egress/guarded-fetch.js';
import { researchPageProfile } from '../dist/src/egress/fetch-profile.js';
import { createCrawler } from '../dist/src/research/crawl/crawler.js';
import { RESEARCH_LIMIT_DEFAULTS, RESEARCH_USER_AGENT } from '../dist/src/contracts/research-limits.js';
import { realisticPage } from './extract-speed.bench.mjs';

const ORIGIN_IP = '127.0.0.2';
const PAGES = 20;

export async function prerequisites() {
  const server = net.createServer();
  try {
    await new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, ORIGIN_IP, resolve);
    });
    return [];
  } catch (err) {
    return [`cannot listen on ${ORIGIN_IP} (${err.code ?? err.message}); on macOS: sudo ifconfig lo0 alias ${ORIGIN_IP}`];
  } finally {
    server.close();
  }
}

/** Page 0 links to pages 1…19; the realistic body's own links lead nowhere (404). */
function site(pageBytes) {
  const pages = new Map();
  const links = Array.from({ length: PAGES - 1 }, (_, i) => `<a href="/p/${i + 1}">page ${i + 1}</a>`).join(' ');
  for (let i = 0; i < PAGES; i++) {
    const body = realisticPage(pageBytes, i).toString('utf8');
    pages.set(`/p/${i}`, Buffer.from(i === 0 ? body.replace('<body class="page">', `<body class="page"><nav>${links}</nav>`) : body));
  }
  pages.set('/robots.txt', Buffer.from('User-agent: *\nDisallow: /private\n'));
  return pages;
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const round = (n) => Math.round(n * 100) / 100;

export default async function run() {
  const short = process.env.BENCH_SHORT === '1';
  const rounds = short ? 3 : 9;
  let pages = site(32 * 1024);
  const server = http.createServer((req, res) => {
    const body = pages.get(req.url ?? '');
    if (body === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    res.writeHead(200, { 'content-type': req.url === '/robots.txt' ? 'text/plain' : 'text/html; charset=utf-8', 'content-length': String(body.length) });
    res.end(body);
  });
  await new Promise((resolve) => server.listen(0, ORIGIN_IP, resolve));
  const base = `http://crawl.test:${server.address().port}`;
  const log = pino({ level: 'silent' });
  const guard = createGuardedFetch({ log, resolveOverrides: new Map([['crawl.test', ORIGIN_IP]]), allowCidrs: [`${ORIGIN_IP}/32`] });
  const crawler = createCrawler({ log, fetch: guard });
  // Page 0 is the source; at depth 1 the crawl reaches pages 1…19 through its <nav> (they come
  // first in document order, before the page's own menu, so maxPages stops the crawl right after them). The guard alone
  // fetches the same 20 URLs.
  const limits = { ...RESEARCH_LIMIT_DEFAULTS, maxDepth: 1 };
  const sources = Array.from({ length: PAGES }, (_, i) => `${base}/p/${i}`);

  async function crawlOnce() {
    const outcome = await crawler.crawl({ runId: 'bench', query: 'bench', sourceUrls: [sources[0]], limits }, new globalThis.AbortController().signal);
    const got = outcome.snapshots.map((s) => s.canonicalUrl).join(' ');
    if (got !== sources.join(" ")) throw new Error(`crawl collected ${got}, expected the 20 pages in order; skipped ${JSON.stringify(outcome.skipped.slice(0, 5))} ${outcome.stoppedBy}`);
    return outcome;
  }
  async function guardOnce() {
    let bytes = 0;
    for (const url of sources) {
      const result = await guard({ url, profile: researchPageProfile({ userAgent: RESEARCH_USER_AGENT, maxResponseBytes: limits.maxBytesPerPage, deadlineMs: limits.maxDurationMs }) });
      bytes += result.response_bytes;
    }
    return bytes;
  }

  const pageBytes = pages.get('/p/1').length;
  const crawlMs = [];
  const guardMs = [];
  let largeRun;
  try {
    await crawlOnce();
    await guardOnce();
    for (let i = 0; i < rounds; i++) {
      const order = i % 2 === 0 ? ['crawl', 'guard'] : ['guard', 'crawl'];
      for (const side of order) {
        const started = performance.now();
        if (side === 'crawl') await crawlOnce();
        else await guardOnce();
        (side === 'crawl' ? crawlMs : guardMs).push(performance.now() - started);
      }
    }
    // One 20 × 1 MiB run at the default limits.
    // Just under 1 MiB each, so the 20 pages fit the 20 MiB default maxTotalBytes.
    pages = site(1024 * 1024 - 4096);
    const started = performance.now();
    const cpu = process.cpuUsage();
    const outcome = await crawlOnce();
    const used = process.cpuUsage(cpu);
    largeRun = {
      wall_ms: Math.round(performance.now() - started),
      cpu_ms: Math.round((used.user + used.system) / 1000),
      bytes: outcome.snapshots.reduce((sum, s) => sum + s.bytes, 0),
      stopped_by: outcome.stoppedBy ?? null,
    };
  } finally {
    await guard.close();
    server.closeAllConnections?.();
    await new Promise((resolve) => server.close(resolve));
  }
  const ratio = median(crawlMs) / median(guardMs);
  return {
    name: 'research-crawl',
    pages: PAGES,
    page_bytes: pageBytes,
    rounds,
    crawl_p50_ms: round(median(crawlMs)),
    guard_alone_p50_ms: round(median(guardMs)),
    ratio: round(ratio),
    paired_ratio_p50: round(median(crawlMs.map((c, i) => c / guardMs[i]))),
    target_ratio: 1.2,
    within_target: ratio <= 1.2,
    large_run_20_pages: largeRun,
    // crawlOnce already checked that all 20 pages were collected (the stop is maxPages, not time).
    large_run_fits_30s: largeRun.wall_ms < 30_000 && largeRun.stopped_by !== `maxDurationMs (${String(limits.maxDurationMs)} ms) reached`,
  };
}
