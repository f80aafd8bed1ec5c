/**
 * web_read and web_crawl: the MCP server's web reading, run in the MCP process through the one
 * egress guard (src/egress/guarded-fetch.ts) and the crawl engine (src/research/crawl), with the
 * admin seams of `fusion mcp` (--resolve/--allow-cidr, FUSION_EGRESS_RESOLVE/ALLOW_CIDRS).
 * Nothing is stored: no run, no snapshot rows. The guard (and its extraction workers) is made
 * on first use, so a session that never reads the web never starts them.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../log.js';
import { UNTRUSTED_CAUTION } from '../contracts/research-limits.js';
import { normalisePayload } from '../contracts/research.js';
import type { WebCrawlInput } from '../contracts/agent-tools.js';
import { createGuardedFetch, type GuardedFetch } from '../egress/guarded-fetch.js';
import { parseResolveList } from '../egress/resolve-list.js';
import { createCrawler, buildResearchDocument } from '../research/crawl/crawler.js';
import type { CrawlOutcome } from '../research/crawl/port.js';

export interface WebToolsOptions {
  log: Logger;
  /** `HOST:IP` overrides (admin seam; the guard warns when used). */
  resolve: readonly string[];
  /** CIDRs treated as public (admin seam). */
  allowCidrs: readonly string[];
}

export interface WebReadOutcome {
  markdown: string;
  url: string;
  finalUrl: string;
  status: number;
  contentType: string;
  truncated: boolean;
  responseBytes: number;
  contentSha256: string;
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
  close(): Promise<void>;
}

export function createWebTools(options: WebToolsOptions): WebTools {
  // Parsed now so a bad seam fails `fusion mcp` at start, not on the first call.
  const resolveOverrides = parseResolveList(options.resolve, '--resolve');
  let guard: GuardedFetch | undefined;
  const fetcher = (): GuardedFetch => (guard ??= createGuardedFetch({ log: options.log, resolveOverrides, allowCidrs: options.allowCidrs }));

  return {
    async read(url, signal) {
      const r = await fetcher()({ url, extract: 'markdown' }, signal);
      const provenance = [
        `Source: <${r.final_url}>${r.final_url === r.url ? '' : ` (requested as <${r.url}>)`}`,
        `HTTP ${String(r.status)}, ${r.content_type}, ${String(r.response_bytes)} bytes, sha256 ${r.content_sha256}${r.truncated ? '; the text below was cut at the output cap' : ''}`,
      ].join('\n');
      return {
        markdown: `${UNTRUSTED_CAUTION}\n\n${provenance}\n\n---\n\n${r.content}${r.content.endsWith('\n') ? '' : '\n'}`,
        url: r.url,
        finalUrl: r.final_url,
        status: r.status,
        contentType: r.content_type,
        truncated: r.truncated,
        responseBytes: r.response_bytes,
        contentSha256: r.content_sha256,
      };
    },

    async crawl(input, signal) {
      const payload = normalisePayload(input);
      const crawler = createCrawler({ log: options.log, fetch: fetcher() });
      // Not a durable run: the id only names this crawl in logs and the document.
      const id = `web-crawl-${randomBytes(6).toString('hex')}`;
      const outcome = await crawler.crawl({ runId: id, ...payload }, signal ?? new AbortController().signal);
      return {
        markdown: buildResearchDocument({ id, query: payload.query }, outcome).content,
        pages: outcome.snapshots.map((s) => ({ url: s.url, canonicalUrl: s.canonicalUrl, finalUrl: s.finalUrl, httpStatus: s.httpStatus, contentType: s.contentType, bytes: s.bytes, sha256: s.sha256 })),
        skipped: outcome.skipped,
        robots: outcome.robots,
        ...(outcome.stoppedBy === undefined ? {} : { stoppedBy: outcome.stoppedBy }),
      };
    },

    async close() {
      await guard?.close();
      guard = undefined;
    },
  };
}
