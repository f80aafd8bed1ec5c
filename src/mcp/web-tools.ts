/**
 * web_read, web_crawl and web_search: the MCP server's web reading, run in the MCP process through the one
 * egress guard (src/egress/guarded-fetch.ts) and the crawl engine (src/research/crawl) with the
 * research egress profile (the same profile as research runs), with the
 * admin seams of `fusion mcp` (--resolve/--allow-cidr, FUSION_EGRESS_RESOLVE/ALLOW_CIDRS).
 * Nothing is stored: no run, no snapshot rows. The guard (and its extraction workers) is made
 * on first use, so a session that never reads the web never starts them. web_search asks the
 * configured provider (src/search/) through the same guard and fetches none of its results:
 * the agent passes on the ones it chose.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../log.js';
import { RESEARCH_LIMIT_DEFAULTS, UNTRUSTED_CAUTION } from '../contracts/research-limits.js';
import { normalisePayload } from '../contracts/research.js';
import type { WebCrawlInput, WebSearchInput } from '../contracts/agent-tools.js';
import { FusionError } from '../errors.js';
import type { SearchConfig } from '../search/search-config.js';
import { createWebSearch, type SearchOutcome } from '../search/web-search.js';
import { createGuardedFetch, type GuardedFetch } from '../egress/guarded-fetch.js';
import { parseResolveList } from '../egress/resolve-list.js';
import { createCrawler, buildResearchDocument } from '../research/crawl/crawler.js';
import { codeSpan, fenced, urlLink } from '../research/crawl/research-document.js';
import type { CrawlOutcome } from '../research/crawl/port.js';

export interface WebToolsOptions {
  log: Logger;
  /** `HOST:IP` overrides (admin seam; the guard warns when used). */
  resolve: readonly string[];
  /** CIDRs treated as public (admin seam). */
  allowCidrs: readonly string[];
  /** The web-search provider (FUSION_SEARCH_*), or null/absent: web_search says how to configure one. */
  search?: SearchConfig | null;
}

export interface WebSearchReply extends SearchOutcome {
  markdown: string;
}

export interface WebReadOutcome {
  /** False when robots.txt or a limit kept the page out (the markdown says why). */
  read: boolean;
  markdown: string;
  url: string;
  canonicalUrl: string;
  finalUrl: string | null;
  httpStatus: number | null;
  contentType: string | null;
  bytes: number | null;
  sha256: string | null;
  /** True when the page text was cut at the research profile's snapshot text cap. */
  truncated: boolean;
  robots: CrawlOutcome['robots'];
}

export interface WebCrawlOutcome {
  markdown: string;
  /** Snapshot metadata (the text is in `markdown`). */
  pages: Array<{ url: string; canonicalUrl: string; finalUrl: string | null; httpStatus: number | null; contentType: string | null; bytes: number | null; sha256: string | null }>;
  skipped: CrawlOutcome['skipped'];
  robots: CrawlOutcome['robots'];
  stoppedBy?: string;
}

export interface WebTools {
  read(url: string, signal?: AbortSignal): Promise<WebReadOutcome>;
  crawl(input: WebCrawlInput, signal?: AbortSignal): Promise<WebCrawlOutcome>;
  search(input: WebSearchInput, signal?: AbortSignal): Promise<WebSearchReply>;
  close(): Promise<void>;
}

/** Pages a web_read may touch: the source and the targets of its redirects (links are not followed). */
const READ_MAX_PAGES = 6;

/** The message of a search asked for without a provider: what to set. */
export const SEARCH_UNAVAILABLE_MESSAGE =
  'web search needs a provider: set FUSION_SEARCH_PROVIDER (searxng or brave), FUSION_SEARCH_URL, FUSION_SEARCH_ALLOW_HOSTS and, for brave, FUSION_SEARCH_API_KEY (docs/operations.md#web-search)';

/**
 * Search results as Markdown: the untrusted-content caution, then each result's provider text
 * in code spans (a title or snippet cannot forge a heading or the caution), with whether its URL
 * passed the source rules.
 */
export function searchMarkdown(outcome: SearchOutcome): string {
  const lines = [UNTRUSTED_CAUTION, `# Web search (${outcome.provider}): ${codeSpan(outcome.query)}`];
  if (outcome.results.length === 0) lines.push('No results.');
  for (const r of outcome.results) {
    const where = r.fetchable && r.canonicalUrl !== null ? urlLink(r.canonicalUrl) : `${codeSpan(r.url)} (not fetchable: ${codeSpan(r.refused ?? 'refused')})`;
    lines.push([`${String(r.rank)}. ${where}`, `   - Title: ${codeSpan(r.title || '(none)')}`, `   - Snippet: ${codeSpan(r.snippet || '(none)')}`].join('\n'));
  }
  lines.push('Nothing was fetched. Pass only the results you judged relevant on, as web_read/web_crawl URLs or research sources.');
  return `${lines.join('\n\n')}\n`;
}

function crawlId(kind: string): string {
  return `${kind}-${randomBytes(6).toString('hex')}`;
}

export function createWebTools(options: WebToolsOptions): WebTools {
  // Parsed now so a bad seam fails `fusion mcp` at start, not on the first call.
  const resolveOverrides = parseResolveList(options.resolve, '--resolve');
  let guard: GuardedFetch | undefined;
  const fetcher = (): GuardedFetch => (guard ??= createGuardedFetch({ log: options.log, resolveOverrides, allowCidrs: options.allowCidrs }));

  return {
    async read(url, signal) {
      // One page is a crawl that follows no link: the same research profile (User-Agent, media
      // types, robots.txt, caps) as research runs, rather than a second way to fetch.
      const crawler = createCrawler({ log: options.log, fetch: fetcher() });
      const limits = { ...RESEARCH_LIMIT_DEFAULTS, maxDepth: 0, maxPages: READ_MAX_PAGES };
      const outcome = await crawler.crawl({ runId: crawlId('web-read'), query: url, sourceUrls: [url], limits }, signal ?? new AbortController().signal);
      const page = outcome.snapshots.find((s) => s.content !== null);
      if (page === undefined) {
        // Not a failed fetch (those reject with their egress code): robots.txt or a limit kept
        // the page out. Said in the reply, with the reasons, rather than under a borrowed code.
        const why = outcome.skipped.map((s) => `- ${codeSpan(s.url)}: ${codeSpan(s.reason)}`).join('\n') || '- no page was collected';
        return { read: false, markdown: `Nothing was read from ${codeSpan(url)}:\n\n${why}\n`, url, canonicalUrl: url, finalUrl: null, httpStatus: null, contentType: null, bytes: null, sha256: null, truncated: false, robots: outcome.robots };
      }
      const text = page.content!.startsWith(`${UNTRUSTED_CAUTION}\n\n`) ? page.content!.slice(UNTRUSTED_CAUTION.length + 2) : page.content!;
      const provenance = [
        `- Fetched ${page.fetchedAt} as ${codeSpan(crawler.userAgent)}: HTTP ${String(page.httpStatus)}, ${codeSpan(page.contentType ?? 'unknown type')}, ${String(page.bytes)} bytes, sha256 ${codeSpan(page.sha256 ?? '')}`,
        ...(page.finalUrl !== null && page.finalUrl !== page.canonicalUrl ? [`- Final URL after redirects: ${urlLink(page.finalUrl)}`] : []),
        ...(page.truncated === true ? ['- The text was cut at the snapshot text limit.'] : []),
      ].join('\n');
      return {
        read: true,
        // Page text is fenced so a page cannot forge a heading or the caution of this reply.
        markdown: `${[UNTRUSTED_CAUTION, `# ${urlLink(page.canonicalUrl)}`, provenance, fenced(text)].join('\n\n')}\n`,
        url: page.url,
        canonicalUrl: page.canonicalUrl,
        finalUrl: page.finalUrl,
        httpStatus: page.httpStatus,
        contentType: page.contentType,
        bytes: page.bytes,
        sha256: page.sha256,
        truncated: page.truncated === true,
        robots: outcome.robots,
      };
    },

    async crawl(input, signal) {
      const payload = normalisePayload(input);
      const crawler = createCrawler({ log: options.log, fetch: fetcher() });
      // Not a durable run: the id only names this crawl in logs and the document.
      const id = crawlId('web-crawl');
      const outcome = await crawler.crawl({ runId: id, ...payload }, signal ?? new AbortController().signal);
      return {
        markdown: buildResearchDocument({ id, query: payload.query }, outcome).content,
        pages: outcome.snapshots.map((s) => ({ url: s.url, canonicalUrl: s.canonicalUrl, finalUrl: s.finalUrl, httpStatus: s.httpStatus, contentType: s.contentType, bytes: s.bytes, sha256: s.sha256 })),
        skipped: outcome.skipped,
        robots: outcome.robots,
        ...(outcome.stoppedBy === undefined ? {} : { stoppedBy: outcome.stoppedBy }),
      };
    },

    async search(input, signal) {
      if (options.search === undefined || options.search === null) throw new FusionError('search_unavailable', SEARCH_UNAVAILABLE_MESSAGE);
      const searcher = createWebSearch({ config: options.search, fetch: fetcher(), log: options.log });
      const outcome = await searcher.search(input.query, { ...(input.count === undefined ? {} : { count: input.count }), ...(signal === undefined ? {} : { signal }) });
      return { ...outcome, markdown: searchMarkdown(outcome) };
    },

    async close() {
      await guard?.close();
      guard = undefined;
    },
  };
}
