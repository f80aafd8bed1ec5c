/**
 * One research crawl: breadth-first from the source URLs (depth 0), following the links of HTML
 * pages, one page at a time in queue order (so limits cut the same pages on every run), through
 * the one guarded fetch with the `research` profile.
 *
 * Limits, each checked before the next page is requested:
 * - maxPages: snapshots collected; page requests (failed ones included) are also bounded by
 *   twice that, so a run of dead links stays polite;
 * - maxDepth: links of a page at maxDepth are not followed;
 * - maxDomains: distinct hosts admitted to the queue, in admission order; a URL on one more
 *   host is skipped;
 * - maxBytesPerPage: the raw byte cap of each request;
 * - maxTotalBytes: each request's cap is also the budget left, and a page over it stops the
 *   crawl (robots.txt bytes do not count);
 * - maxDurationMs: one deadline over everything (an AbortSignal combined with the caller's; each
 *   fetch also gets the remaining time as its own deadline); when it passes the crawl stops and
 *   returns what it collected.
 *
 * Skips are listed with a reason: robots.txt, type, HTTP and network failures, limits,
 * duplicates (a URL whose canonical form was already admitted; a link text already seen is
 * dropped silently, so a menu repeated on every page is not listed twenty times). Non-http(s)
 * links (mailto:, javascript:) and links past maxDepth are not candidates and are not listed.
 *
 * Failures: a source URL refused by egress policy rejects the run with that error; the caller's
 * signal rejects it with `cancelled`; when no page was collected the first error rejects it (a
 * failed fetch, or a robots.txt that could not be read). A run where every page was skipped
 * without an error (disallowed by robots.txt, limits) resolves with no snapshots.
 */
import type { Logger } from '../../log.js';
import { untrusted } from '../../log.js';
import { FusionError, toFusionError } from '../../errors.js';
import { EGRESS_CODES, POLICY_CODES, type GuardedFetch, type GuardedFetchResult } from '../../egress/guarded-fetch.js';
import { researchPageProfile } from '../../egress/fetch-profile.js';
import { HTML_MEDIA_TYPES } from '../../egress/constants.js';
import { UNTRUSTED_CAUTION } from '../../contracts/research-limits.js';
import { canonicalizeCrawlUrl, type CanonicalUrl } from './canonical-url.js';
import { RobotsCache } from './robots-cache.js';
import { robotsAllows } from './robots.js';
import type { CrawlOutcome, CrawlRequest, CrawlSkip, CrawlSnapshot } from './port.js';

/** Skips listed in an outcome at most; the rest are counted in `skippedOmitted`. */
export const MAX_SKIPPED_LISTED = 200;

interface QueueItem {
  /** As given or as found on the page (absolute). */
  url: string;
  canonical: CanonicalUrl;
  depth: number;
}

export interface CrawlRunOptions {
  fetch: GuardedFetch;
  userAgent: string;
  log: Logger;
}

function cancelled(): FusionError {
  return new FusionError('cancelled', 'the research run was cancelled');
}

export async function runCrawl(request: CrawlRequest, signal: AbortSignal, options: CrawlRunOptions): Promise<CrawlOutcome> {
  if (signal.aborted) throw cancelled();
  const { limits } = request;
  const { fetch, userAgent } = options;
  const log = options.log.child({ runId: request.runId });

  const started = performance.now();
  const remainingMs = (): number => limits.maxDurationMs - (performance.now() - started);
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new FusionError('request_timeout', `the research run's ${String(limits.maxDurationMs)} ms deadline passed`)), limits.maxDurationMs);
  const runSignal = AbortSignal.any([signal, deadline.signal]);
  const timedOut = (): boolean => deadline.signal.aborted || remainingMs() <= 1;

  const snapshots: CrawlSnapshot[] = [];
  const skipped: CrawlSkip[] = [];
  let skippedOmitted = 0;
  const admitted = new Set<string>();
  /** Canonical URLs of collected pages, requested or reached by redirect. */
  const collected = new Set<string>();
  const seenText = new Set<string>();
  const hosts = new Set<string>();
  const queue: QueueItem[] = [];
  let usedBytes = 0;
  let requests = 0;
  let firstError: FusionError | undefined;
  let stoppedBy: string | undefined;
  const robots = new RobotsCache({ fetch, userAgent, log, remainingMs, signal: runSignal });

  /** Lists a skipped URL; `quiet` for the queue left at a stop, which is logged as one line. */
  const skip = (url: string, reason: string, depth: number | undefined, quiet = false): void => {
    if (!quiet) log.info({ url: untrusted(url), depth, decision: 'skip', reason: untrusted(reason, 300) }, 'research page decision');
    if (skipped.length < MAX_SKIPPED_LISTED) skipped.push({ url, reason });
    else skippedOmitted += 1;
  };

  /** Queues a URL unless it duplicates an admitted one or would exceed maxDomains. */
  const admit = (url: string, canonical: CanonicalUrl, depth: number): void => {
    const repeatedText = seenText.has(url);
    seenText.add(url);
    if (admitted.has(canonical.url)) {
      if (!repeatedText) skip(url, `duplicate of ${canonical.url}, already in this run`, depth);
      return;
    }
    if (!hosts.has(canonical.host) && hosts.size >= limits.maxDomains) {
      if (!repeatedText) skip(url, `maxDomains (${String(limits.maxDomains)}) reached: host ${canonical.host} is not crawled`, depth);
      return;
    }
    hosts.add(canonical.host);
    admitted.add(canonical.url);
    queue.push({ url, canonical, depth });
  };

  const follow = (result: GuardedFetchResult, depth: number): void => {
    for (const link of result.links ?? []) {
      let canonical: CanonicalUrl;
      try {
        canonical = canonicalizeCrawlUrl(link);
      } catch {
        continue; // the extractor returns absolute http(s) links; anything else is not a candidate
      }
      admit(link, canonical, depth);
    }
  };

  try {
    // Every source is shaped before any request: a malformed or non-http(s) one fails the run
    // exactly as its fetch would, with nothing sent.
    const sources = request.sourceUrls.map((url) => ({ url, canonical: canonicalizeCrawlUrl(url) }));
    for (const source of sources) admit(source.url, source.canonical, 0);

    while (queue.length > 0) {
      if (signal.aborted) throw cancelled();
      if (timedOut()) {
        stoppedBy = `maxDurationMs (${String(limits.maxDurationMs)} ms) reached`;
        break;
      }
      if (snapshots.length >= limits.maxPages) {
        stoppedBy = `maxPages (${String(limits.maxPages)}) reached`;
        break;
      }
      if (requests >= limits.maxPages * 2) {
        stoppedBy = `page request bound (${String(limits.maxPages * 2)}, twice maxPages) reached`;
        break;
      }
      if (usedBytes >= limits.maxTotalBytes) {
        stoppedBy = `maxTotalBytes (${String(limits.maxTotalBytes)}) reached`;
        break;
      }
      const item = queue.shift() as QueueItem;
      const outcome = await visit(item);
      if (outcome === 'stop') break;
    }
    if (queue.length > 0) {
      log.info({ decision: 'skip', notFetched: queue.length, reason: stoppedBy }, 'research pages left in the queue');
      for (const item of queue) skip(item.url, `not fetched: ${stoppedBy ?? 'crawl stopped'}`, item.depth, true);
    }
    if (snapshots.length === 0 && firstError !== undefined) throw firstError;
    if (snapshots.length === 0 && stoppedBy !== undefined && timedOut()) {
      throw new FusionError('request_timeout', `the research run's ${String(limits.maxDurationMs)} ms deadline passed before any page was collected`);
    }
    log.info({ snapshots: snapshots.length, skipped: skipped.length + skippedOmitted, bytes: usedBytes, stoppedBy }, 'research crawl done');
    return {
      snapshots,
      skipped,
      robots: await robots.notes(),
      userAgent,
      ...(skippedOmitted > 0 ? { skippedOmitted } : {}),
      ...(stoppedBy === undefined ? {} : { stoppedBy }),
    };
  } catch (err) {
    if (signal.aborted) throw cancelled();
    throw err;
  } finally {
    clearTimeout(timer);
  }

  /** Fetches one queued page (robots.txt first); 'stop' ends the crawl. */
  async function visit(item: QueueItem): Promise<'next' | 'stop'> {
    const { url, canonical, depth } = item;
    let entry;
    try {
      entry = await robots.get(canonical.origin);
    } catch (err) {
      return failed(item, toFusionError(err, 'network_error'), false);
    }
    const rules = entry.rules;
    if (rules === undefined) {
      skip(url, `robots.txt of ${canonical.origin} could not be read: nothing is fetched from this host`, depth);
      firstError ??= entry.error;
      return 'next';
    }
    const target = new URL(canonical.url);
    const verdict = robotsAllows(rules, `${target.pathname}${target.search}`);
    if (!verdict.allowed) {
      skip(url, `disallowed by robots.txt (Disallow: ${verdict.rule?.pattern ?? ''})`, depth);
      return 'next';
    }
    const budget = limits.maxTotalBytes - usedBytes;
    const cap = Math.min(limits.maxBytesPerPage, budget);
    requests += 1;
    let result: GuardedFetchResult;
    try {
      result = await fetch({ url: canonical.url, profile: researchPageProfile({ userAgent, maxResponseBytes: cap, deadlineMs: remainingMs() }) }, runSignal);
    } catch (err) {
      return failed(item, toFusionError(err, 'network_error'), cap < limits.maxBytesPerPage);
    }
    usedBytes += result.response_bytes;
    const final = canonicalizeCrawlUrl(result.final_url);
    if (final.url !== canonical.url && collected.has(final.url)) {
      skip(url, `redirected to ${final.url}, already collected`, depth);
      return 'next';
    }
    // A later link to where this page redirected is a duplicate, not another request.
    admitted.add(final.url);
    collected.add(canonical.url);
    collected.add(final.url);
    snapshots.push({
      url,
      canonicalUrl: canonical.url,
      finalUrl: result.final_url,
      httpStatus: result.status,
      contentType: result.content_type,
      bytes: result.response_bytes,
      sha256: result.content_sha256,
      content: `${UNTRUSTED_CAUTION}\n\n${result.content}`,
      fetchedAt: new Date().toISOString(),
      depth,
      ...(result.truncated ? { truncated: true } : {}),
    });
    const links = HTML_MEDIA_TYPES.has(result.content_type) && depth < limits.maxDepth ? (result.links ?? []).length : 0;
    log.info({ url: untrusted(url), depth, decision: 'collect', httpStatus: result.status, bytes: result.response_bytes, links }, 'research page decision');
    if (links > 0) follow(result, depth + 1);
    return 'next';
  }

  /** A failed robots.txt lookup or page fetch: fail the run, stop, or skip the page. */
  function failed(item: QueueItem, error: FusionError, cappedByBudget: boolean): 'next' | 'stop' {
    if (signal.aborted) throw cancelled();
    if (timedOut()) {
      stoppedBy = `maxDurationMs (${String(limits.maxDurationMs)} ms) reached`;
      skip(item.url, `not fetched: ${stoppedBy}`, item.depth);
      firstError ??= new FusionError('request_timeout', `the research run's ${String(limits.maxDurationMs)} ms deadline passed before any page was collected`);
      return 'stop';
    }
    if (!EGRESS_CODES.has(error.code)) throw error;
    if (item.depth === 0 && POLICY_CODES.has(error.code)) throw error;
    if (error.code === 'response_too_large' && cappedByBudget) {
      stoppedBy = `maxTotalBytes (${String(limits.maxTotalBytes)}) reached`;
      skip(item.url, `not fetched: the page is larger than the ${String(limits.maxTotalBytes - usedBytes)} bytes left of maxTotalBytes`, item.depth);
      return 'stop';
    }
    const reason = error.code === 'response_too_large' ? `larger than maxBytesPerPage (${String(limits.maxBytesPerPage)}): ${error.message}` : `${error.code}: ${error.message}`;
    skip(item.url, reason, item.depth);
    firstError ??= error;
    return 'next';
  }
}
