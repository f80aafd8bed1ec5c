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
 * robots.txt is asked of at most as many origins as the page request bound (twice maxPages);
 * a URL on one more origin is skipped.
 *
 * The queue holds at most ten times the page requests a run may make (400 at the defaults);
 * further links are not queued (nor listed), which bounds what a page with thousands of links
 * costs.
 *
 * Redirects are not followed inside the fetch: the target is queued next (same depth) and
 * checked like any URL (duplicate, maxDomains, its host's robots.txt, egress policy), at most
 * 5 in a chain; its snapshot keeps the URL the chain started from, with the target as finalUrl.
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
import { DEFAULT_MAX_REDIRECTS, HTML_MEDIA_TYPES } from '../../egress/constants.js';
import { UNTRUSTED_CAUTION } from '../../contracts/research-limits.js';
import { canonicalizeCrawlUrl, type CanonicalUrl } from './canonical-url.js';
import { RobotsCache } from './robots-cache.js';
import { robotsAllows } from './robots.js';
import type { CrawlOutcome, CrawlRequest, CrawlSkip, CrawlSnapshot } from './port.js';

/**
 * Longest URL a crawl requests (characters of its canonical form). Checking a URL against a
 * host's robots.txt costs about its length times the rules, on the daemon's event loop; real
 * pages do not link URLs this long.
 */
export const MAX_CRAWL_URL_CHARS = 8192;

/** Skips listed in an outcome at most; the rest are counted in `skippedOmitted`. */
export const MAX_SKIPPED_LISTED = 200;

interface QueueItem {
  /** As given or as found on the page (absolute). */
  url: string;
  canonical: CanonicalUrl;
  depth: number;
  /** Redirects that led here (0: a source or a link). */
  redirects: number;
  /** The source or link whose redirect chain led here. */
  from?: { url: string; canonical: CanonicalUrl };
}

export interface CrawlRunOptions {
  fetch: GuardedFetch;
  userAgent: string;
  log: Logger;
}

function cancelled(): FusionError {
  return new FusionError('cancelled', 'the research run was cancelled');
}

/**
 * The error a crawl of these sources would fail with before sending anything, or undefined.
 * The crawl shapes every source first (a bad one fails the run), then visits the first admitted
 * source, whose robots.txt lookup meets the guard's host rules before any other request: when
 * those refuse it without DNS (a blocked name, a private literal), the run fails with exactly
 * that error whatever else follows. Computed without a request, so the run can be recorded
 * failed at creation.
 */
export function sourceRefusal(sourceUrls: readonly string[], fetch: GuardedFetch): FusionError | undefined {
  if (fetch.staticRefusal === undefined) return undefined;
  let first: CanonicalUrl | undefined;
  try {
    for (const url of sourceUrls) {
      const canonical = canonicalizeCrawlUrl(url);
      // Sources too long to crawl are skipped at admission (admit, below); the first other is visited.
      if (first === undefined && canonical.url.length <= MAX_CRAWL_URL_CHARS) first = canonical;
    }
  } catch (err) {
    return toFusionError(err);
  }
  return first === undefined ? undefined : fetch.staticRefusal(`${first.origin}/robots.txt`);
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
    if (canonical.url.length > MAX_CRAWL_URL_CHARS) {
      if (!repeatedText) skip(url.slice(0, 200), `URL longer than ${String(MAX_CRAWL_URL_CHARS)} characters: not crawled`, depth);
      return;
    }
    if (!hosts.has(canonical.host) && hosts.size >= limits.maxDomains) {
      if (!repeatedText) skip(url, `maxDomains (${String(limits.maxDomains)}) reached: host ${canonical.host} is not crawled`, depth);
      return;
    }
    hosts.add(canonical.host);
    admitted.add(canonical.url);
    queue.push({ url, canonical, depth, redirects: 0 });
  };

  /** Page requests a run may make (failed ones included). */
  const requestBound = limits.maxPages * 2;
  /**
   * Queue bound: ten times the requests a run may make, room for links that turn out to be
   * disallowed or duplicates, while a page with thousands of links costs no more than that.
   */
  const queueBound = requestBound * 10;
  const follow = (result: GuardedFetchResult, depth: number): void => {
    for (const link of result.links ?? []) {
      if (queue.length >= queueBound) return;
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
      if (requests >= requestBound) {
        stoppedBy = `page request bound (${String(requestBound)}, twice maxPages) reached`;
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
    // A robots.txt lookup is a request too, and a failed one fetches no page (so it does not
    // count against requestBound): bound the origins (a host on many ports is many origins)
    // a run asks, or a page linking one host's ports would have the crawl knock on hundreds.
    if (!robots.has(canonical.origin) && robots.size >= requestBound) {
      skip(url, `not fetched: robots.txt lookup bound (${String(requestBound)} origins, twice maxPages) reached`, depth);
      return 'next';
    }
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
    if (result.redirect !== undefined) return redirected(item, result.status, result.redirect);
    snapshots.push({
      url: item.from?.url ?? url,
      canonicalUrl: item.from?.canonical.url ?? canonical.url,
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

  /**
   * A redirect answer: its target is queued next, at the same depth, and goes through the same
   * checks as any URL (duplicates, maxDomains, robots.txt of its host, egress policy).
   */
  function redirected(item: QueueItem, status: number, location: string): 'next' | 'stop' {
    const from = item.from ?? { url: item.url, canonical: item.canonical };
    if (item.redirects >= DEFAULT_MAX_REDIRECTS) {
      return failed(item, new FusionError('redirect_limit', `more than ${String(DEFAULT_MAX_REDIRECTS)} redirects from ${from.url}`, { details: { http_status: status } }), false);
    }
    const target = canonicalizeCrawlUrl(location); // the guard already shaped it
    if (target.url.length > MAX_CRAWL_URL_CHARS) {
      skip(item.url, `redirects (HTTP ${String(status)}) to a URL longer than ${String(MAX_CRAWL_URL_CHARS)} characters: not crawled`, item.depth);
      return 'next';
    }
    if (admitted.has(target.url)) {
      skip(item.url, `redirects (HTTP ${String(status)}) to ${target.url}, already in this run`, item.depth);
      return 'next';
    }
    if (!hosts.has(target.host) && hosts.size >= limits.maxDomains) {
      skip(item.url, `redirects (HTTP ${String(status)}) to ${target.url}: maxDomains (${String(limits.maxDomains)}) reached, host ${target.host} is not crawled`, item.depth);
      return 'next';
    }
    hosts.add(target.host);
    admitted.add(target.url);
    queue.unshift({ url: location, canonical: target, depth: item.depth, redirects: item.redirects + 1, from });
    log.info({ url: untrusted(item.url), depth: item.depth, decision: 'redirect', httpStatus: status, location: untrusted(location) }, 'research page decision');
    return 'next';
  }

  /** A failed robots.txt lookup or page fetch: fail the run, stop, or skip the page. */
  function failed(item: QueueItem, cause: FusionError, cappedByBudget: boolean): 'next' | 'stop' {
    // A target reached by redirect that policy refuses is a blocked redirect, as in the guard.
    const error =
      item.from !== undefined && (cause.code === 'blocked_address' || cause.code === 'invalid_url' || cause.code === 'unsupported_scheme')
        ? new FusionError('redirect_blocked', `redirect from ${item.from.url} blocked: ${cause.message}`, { cause, details: { ...cause.details, rule: cause.code } })
        : cause;
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
