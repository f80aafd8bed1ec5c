/**
 * FUSION_SEARCH_ALLOW_HOSTS entries are spelled as the guard sees a URL's host (WHATWG: IDNA,
 * IPv4 shorthand, IPv6 compression, case, trailing dots), and an entry that is not a bare host
 * is refused naming the variable rather than never matching or matching more than written.
 */
import { describe, expect, it } from 'vitest';
import { searchConfigFrom } from '../../../src/search/search-config.js';
import { parseFetchUrl } from '../../../src/egress/fetch-url.js';

function allows(url: string, hosts: string): boolean {
  const config = searchConfigFrom({ FUSION_SEARCH_PROVIDER: 'searxng', FUSION_SEARCH_URL: url, FUSION_SEARCH_ALLOW_HOSTS: hosts })!;
  return config.allowHosts.has(parseFetchUrl(config.baseUrl.href).host);
}

describe('FUSION_SEARCH_ALLOW_HOSTS spellings', () => {
  it.each([
    ['http://bücher.test/', 'bücher.test'],
    ['http://xn--bcher-kva.test/', 'BÜCHER.test.'],
    ['http://127.0.0.1/', '0x7f.1'],
    ['http://[::1]/', '0:0:0:0:0:0:0:1'],
    ['http://[::1]/', '[::1]'],
    ['http://Searx.TEST./', 'searx.test'],
  ])('%s is allowed by %s', (url, hosts) => {
    expect(allows(url, hosts)).toBe(true);
  });

  it.each(['searx.test:8443', 'searx.test/path', 'user@searx.test', 'http://searx.test', 'searx test'])('the entry %s is refused naming the variable', (entry) => {
    expect(() => searchConfigFrom({ FUSION_SEARCH_PROVIDER: 'searxng', FUSION_SEARCH_URL: 'http://searx.test/', FUSION_SEARCH_ALLOW_HOSTS: `searx.test,${entry}` })).toThrow(/FUSION_SEARCH_ALLOW_HOSTS entry .* is not a bare host/u);
  });
});
