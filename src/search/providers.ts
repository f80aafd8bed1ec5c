/**
 * The wire formats of the search providers: how a query becomes one GET request, and how the
 * provider's JSON answer becomes results (title, URL, snippet). Pure: no I/O.
 *
 * - SearXNG: `GET {base}/search?q=QUERY&format=json` (the instance must enable the json format
 *   in its settings, else it answers 403). Answer: `{query, number_of_results, results:[{url,
 *   title, content, engine, …}], answers, suggestions, infoboxes, unresponsive_engines}`.
 * - Brave Search API: `GET {base}/res/v1/web/search?q=QUERY&count=N` with
 *   `Accept: application/json` and `X-Subscription-Token: KEY`. Answer: `{type:'search',
 *   query:{original, …}, web:{type:'search', results:[{title, url, description, …}]}, …}`;
 *   `web` is absent when nothing was found. Snippets carry `<strong>` highlighting.
 *
 * Everything in an answer is untrusted: fields of the wrong type are skipped, text is stripped
 * of markup and bounded, and the results are capped at the count asked for.
 */
import { FusionError } from '../errors.js';
import type { SearchConfig, SearchProviderName } from './search-config.js';

/** Results one search returns at most (Brave's own cap per request). */
export const SEARCH_MAX_RESULTS = 20;
export const SEARCH_DEFAULT_RESULTS = 10;
/** Characters kept of a title / snippet / URL from a provider. */
export const SEARCH_TITLE_MAX_CHARS = 300;
export const SEARCH_SNIPPET_MAX_CHARS = 1000;
export const SEARCH_URL_MAX_CHARS = 8192;

export interface ProviderResult {
  title: string;
  url: string;
  snippet: string;
}

export interface ProviderRequest {
  url: string;
  /** Secret-bearing headers (the key): the guard never logs them. */
  headers: Record<string, string>;
}

function joinPath(base: URL, path: string): URL {
  const url = new URL(base.href);
  url.pathname = `${base.pathname.replace(/\/+$/u, '')}${path}`;
  return url;
}

export function providerRequest(config: SearchConfig, query: string, count: number): ProviderRequest {
  if (config.provider === 'searxng') {
    const url = joinPath(config.baseUrl, '/search');
    url.searchParams.set('q', query);
    url.searchParams.set('format', 'json');
    return { url: url.href, headers: {} };
  }
  const url = joinPath(config.baseUrl, '/res/v1/web/search');
  url.searchParams.set('q', query);
  url.searchParams.set('count', String(count));
  return { url: url.href, headers: { 'x-subscription-token': config.apiKey ?? '' } };
}

const CONTROL = /[\p{Cc}\p{Cf}\u2028\u2029]+/gu;

/** Markup and control characters out, whitespace folded, bounded (a provider's text is untrusted). */
function plain(value: unknown, max: number): string | undefined {
  if (typeof value !== 'string') return undefined;
  const text = value
    .replace(/<[^<>]{0,200}>/gu, '')
    .replace(/&(amp|lt|gt|quot|#39|#x27);/gu, (_, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'", '#x27': "'" })[e] ?? '')
    .replace(CONTROL, ' ')
    .replace(/\s+/gu, ' ')
    .trim();
  return Array.from(text).slice(0, max).join('');
}

function malformed(provider: SearchProviderName, why: string): FusionError {
  return new FusionError('search_failed', `the ${provider} search provider answered malformed JSON: ${why}`, { details: { provider, reason: 'malformed_answer' } });
}

/** The results of a provider's JSON answer text; malformed text or shape is `search_failed`. */
export function parseProviderAnswer(provider: SearchProviderName, text: string, count: number): ProviderResult[] {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    // Not the parser's message: V8 quotes the text around the fault, and a provider's text may
    // hold the key it was sent.
    throw malformed(provider, 'the answer is not valid JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw malformed(provider, 'the answer is not a JSON object');
  const record = body as Record<string, unknown>;
  let items: unknown;
  if (provider === 'searxng') {
    items = record.results;
    if (!Array.isArray(items)) throw malformed(provider, 'no "results" array');
  } else {
    const web = record.web;
    // No `web` section is Brave's "nothing found".
    if (web === undefined || web === null) return [];
    items = (web as Record<string, unknown>).results;
    if (!Array.isArray(items)) throw malformed(provider, '"web.results" is not an array');
  }
  const results: ProviderResult[] = [];
  for (const item of items as unknown[]) {
    if (results.length >= count) break;
    if (typeof item !== 'object' || item === null) continue;
    const r = item as Record<string, unknown>;
    const url = typeof r.url === 'string' ? r.url.trim() : '';
    if (url === '' || url.length > SEARCH_URL_MAX_CHARS) continue;
    const title = plain(r.title, SEARCH_TITLE_MAX_CHARS) ?? '';
    const snippet = plain(provider === 'searxng' ? r.content : r.description, SEARCH_SNIPPET_MAX_CHARS) ?? '';
    results.push({ title, url, snippet });
  }
  return results;
}
