/**
 * Hostile result text from a search provider, through createWebSearch with a stand-in for the
 * guard (no network): a result URL carrying bidi overrides, zero-width or line-break characters
 * is refused by the source rules and reported with those characters escaped, so its raw text
 * never reaches a terminal (`fusion search --json`) or an MCP reply.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/log.js';
import type { GuardedFetch, GuardedFetchResult } from '../../../src/egress/guarded-fetch.js';
import { searchConfigFrom } from '../../../src/search/search-config.js';
import { createWebSearch } from '../../../src/search/web-search.js';

function answering(content: string): GuardedFetch {
  const result: GuardedFetchResult = { url: 'http://searx.test/search', final_url: 'http://searx.test/search', status: 200, content_type: 'application/json', format: 'text', truncated: false, content, response_bytes: content.length, content_sha256: '0'.repeat(64) };
  return Object.assign(async () => Promise.resolve(result), { close: async () => Promise.resolve() });
}

describe('search result URLs with invisible characters', () => {
  it('are refused and reported escaped; printable URLs are unchanged', async () => {
    const urls = ['https://example.com/\u202Egnp.exe', 'https://exa\u200Bmple.com/', 'https://example.com/a\u2028b', 'https://example.com/ok'];
    const config = searchConfigFrom({ FUSION_SEARCH_PROVIDER: 'searxng', FUSION_SEARCH_URL: 'http://searx.test', FUSION_SEARCH_ALLOW_HOSTS: 'searx.test' })!;
    const search = createWebSearch({ config, fetch: answering(JSON.stringify({ results: urls.map((url) => ({ url, title: 't', content: 's' })) })), log: createLogger({ level: 'silent' }) });
    const { results } = await search.search('q');
    expect(results.map((r) => [r.url, r.fetchable])).toEqual([
      ['https://example.com/\\u{202e}gnp.exe', false],
      ['https://exa\\u{200b}mple.com/', false],
      ['https://example.com/a\\u{2028}b', false],
      ['https://example.com/ok', true],
    ]);
    expect(JSON.stringify(results)).not.toMatch(/[\u202E\u200B\u2028]/u);
  });
});
