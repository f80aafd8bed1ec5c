/**
 * web.search (docs/behaviour.md#g14): one query to the configured provider through the one
 * egress guard, profile `search` (src/egress/fetch-profile.ts): only the provider's allowed
 * hosts are reached, the address rules and admin seams are the guard's as for every fetch, a
 * redirect is never followed (the key would travel with it), and the answer must be JSON.
 *
 * The results are untrusted. Each result URL is checked by the declared-source rules
 * (src/contracts/source-url.ts, docs/behaviour.md#e1) and reported `fetchable` or not with the
 * reason; nothing here fetches a result. Provider failures get their own codes
 * (`search_quota_exceeded`, `search_auth_failed`, `search_failed`); every message passes
 * through the one redactor, so a provider that echoes the key cannot leak it.
 */
import { FusionError, isFusionError, toFusionError } from '../errors.js';
import type { Logger } from '../log.js';
import { canonicalizeSourceUrl } from '../contracts/source-url.js';
import { redactSecrets } from '../contracts/secret-redaction.js';
import type { GuardedFetch } from '../egress/guarded-fetch.js';
import { searchProfile } from '../egress/fetch-profile.js';
import type { SearchConfig } from './search-config.js';
import { parseProviderAnswer, providerRequest, SEARCH_DEFAULT_RESULTS, SEARCH_MAX_RESULTS } from './providers.js';

/** Characters of a query (Brave's own limit is 400). */
export const SEARCH_QUERY_MAX_CHARS = 400;

export interface SearchResult {
  /** 1-based position in the provider's answer. */
  rank: number;
  title: string;
  /** As the provider gave it (untrusted), control and format characters escaped as `\u{…}`. */
  url: string;
  snippet: string;
  /** The canonical form when the URL passes the declared-source rules, else null. */
  canonicalUrl: string | null;
  /** True when the URL may be given to web_read, web_crawl, research_run or fusion_research. */
  fetchable: boolean;
  /** Why the URL may not be fetched (the source rule's message), when it may not. */
  refused?: string;
}

export interface SearchOutcome {
  provider: SearchConfig['provider'];
  query: string;
  results: SearchResult[];
}

export interface WebSearch {
  search(query: string, options?: { count?: number; signal?: AbortSignal }): Promise<SearchOutcome>;
}

export interface WebSearchOptions {
  config: SearchConfig;
  /** The process's one guard (its admin seams apply); the search profile is passed per call. */
  fetch: GuardedFetch;
  log: Logger;
}

/** The query, trimmed and checked, or invalid_input naming the field. */
export function checkSearchQuery(raw: unknown, path = 'query'): string {
  const query = typeof raw === 'string' ? raw.trim() : '';
  if (query === '') throw new FusionError('invalid_input', `${path} must be a non-blank string`, { details: { path } });
  if (Array.from(query).length > SEARCH_QUERY_MAX_CHARS) throw new FusionError('invalid_input', `${path} must be at most ${String(SEARCH_QUERY_MAX_CHARS)} characters`, { details: { path } });
  return query;
}

const INVISIBLE = /[\p{Cc}\p{Cf}\u2028\u2029]/gu;

/**
 * A provider's URL as reported: control and format characters (bidi overrides, zero-width
 * marks, line breaks) escaped as `\u{…}`. Such a URL is never fetchable (the source rules refuse
 * it), but its raw text would reach a terminal through `fusion search --json` and the MCP
 * structured reply, where it could reorder or hide what is shown.
 */
function visibleUrl(url: string): string {
  return url.replace(INVISIBLE, (c) => `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}`);
}

export function checkSearchCount(raw: unknown, path = 'count'): number {
  if (raw === undefined) return SEARCH_DEFAULT_RESULTS;
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 1 || raw > SEARCH_MAX_RESULTS) {
    throw new FusionError('invalid_input', `${path} must be a whole number from 1 to ${String(SEARCH_MAX_RESULTS)}`, { details: { path } });
  }
  return raw;
}

/** A guard failure of a search call as the search error a caller can act on. */
function searchError(err: unknown, config: SearchConfig): FusionError {
  const fe = toFusionError(err, 'search_failed');
  const provider = config.provider;
  const status = typeof fe.details.http_status === 'number' ? fe.details.http_status : undefined;
  const details = { provider, ...(status === undefined ? {} : { http_status: status }), cause_code: fe.code };
  const said = redactSecrets(fe.message);
  if (fe.code === 'http_error' && status === 429) {
    return new FusionError('search_quota_exceeded', `the ${provider} search provider refused the query: quota or rate limit reached (HTTP 429); retry later or raise the plan's limit`, { details });
  }
  if (fe.code === 'http_error' && (status === 401 || status === 403)) {
    if (provider === 'searxng' && status === 403) {
      return new FusionError('search_failed', `the SearXNG instance answered HTTP ${String(status)}: its JSON API is off; enable "json" under search.formats in its settings.yml`, { details: { ...details, reason: 'json_format_disabled' } });
    }
    return new FusionError('search_auth_failed', `the ${provider} search provider refused the key (HTTP ${String(status)}): check FUSION_SEARCH_API_KEY`, { details });
  }
  if (fe.code === 'http_error') {
    return new FusionError('search_failed', `the ${provider} search provider failed: ${said}`, { details, retryable: status !== undefined && status >= 500 });
  }
  if (fe.code === 'unsupported_content_type') {
    return new FusionError('search_failed', `the ${provider} search provider did not answer JSON: ${said}`, { details: { ...details, reason: 'not_json' } });
  }
  if (isFusionError(err) && fe.code !== 'internal_error') {
    // Egress codes (timeouts, DNS, blocked addresses, hosts outside the allow list) keep their
    // code: the README's troubleshooting for each applies as it is.
    return new FusionError(fe.code, `search provider ${provider}: ${said}`, { details: { ...fe.details, provider } });
  }
  return new FusionError('search_failed', `the ${provider} search failed: ${said}`, { details });
}

export function createWebSearch(options: WebSearchOptions): WebSearch {
  const { config } = options;
  const log = options.log.child({ component: 'web-search', provider: config.provider });
  return {
    async search(rawQuery, opts = {}) {
      const query = checkSearchQuery(rawQuery);
      const count = checkSearchCount(opts.count);
      const request = providerRequest(config, query, count);
      const profile = searchProfile({ provider: config.provider, allowHosts: config.allowHosts, headers: request.headers, deadlineMs: config.deadlineMs });
      let text: string;
      try {
        const answer = await options.fetch({ url: request.url, profile }, opts.signal);
        if (answer.redirect !== undefined) {
          throw new FusionError('search_failed', `the ${config.provider} search provider answered a redirect (HTTP ${String(answer.status)}); search requests never follow one, so the key stays with the provider: point FUSION_SEARCH_URL at the final address`, {
            details: { provider: config.provider, http_status: answer.status, reason: 'redirect' },
          });
        }
        text = answer.content;
      } catch (err) {
        if (isFusionError(err) && err.code === 'search_failed') throw err;
        const error = searchError(err, config);
        log.info({ code: error.code, httpStatus: error.details.http_status }, 'web search failed');
        throw error;
      }
      const found = parseProviderAnswer(config.provider, text, count);
      const results = found.map((r, i): SearchResult => {
        // Judged on the raw text; reported with its invisible characters escaped.
        const checked = canonicalizeSourceUrl(r.url);
        const url = visibleUrl(r.url);
        return checked.ok
          ? { rank: i + 1, title: r.title, url, snippet: r.snippet, canonicalUrl: checked.url, fetchable: true }
          : { rank: i + 1, title: r.title, url, snippet: r.snippet, canonicalUrl: null, fetchable: false, refused: checked.reason };
      });
      log.info({ results: results.length, refused: results.filter((r) => !r.fetchable).length }, 'web search done');
      return { provider: config.provider, query, results };
    },
  };
}
