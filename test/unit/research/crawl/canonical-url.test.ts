import { describe, expect, it } from 'vitest';
import { canonicalizeCrawlUrl, sortQuery } from '../../../../src/research/crawl/canonical-url.js';
import { FusionError } from '../../../../src/errors.js';

describe('canonicalizeCrawlUrl', () => {
  it.each([
    ['HTTPS://Example.COM:443/a/B?q=1#frag', 'https://example.com/a/B?q=1'],
    ['http://example.com:80/', 'http://example.com/'],
    ['http://example.com:8080/x', 'http://example.com:8080/x'],
    ['http://example.com./a', 'http://example.com/a'],
    ['http://example.com/p?b=2&a=1', 'http://example.com/p?a=1&b=2'],
    ['http://example.com/p?a=2&a=1&b=0', 'http://example.com/p?a=1&a=2&b=0'],
    ['http://example.com/p?z&a=1', 'http://example.com/p?a=1&z'],
    ['http://example.com/p?', 'http://example.com/p'],
    ['http://example.com/p?q=a%20b&p=x+y', 'http://example.com/p?p=x+y&q=a%20b'],
    ['http://example.com/a/', 'http://example.com/a/'],
    ['http://[2001:DB8::1]:8080/x', 'http://[2001:db8::1]:8080/x'],
  ])('%s → %s', (raw, expected) => {
    expect(canonicalizeCrawlUrl(raw).url).toBe(expected);
  });

  it('maps the three duplicate shapes (query order, fragment, host case) to one URL', () => {
    const forms = ['http://A.Test/p?b=2&a=1', 'http://a.test/p?a=1&b=2#x', 'http://a.test/p?a=1&b=2'];
    expect(new Set(forms.map((f) => canonicalizeCrawlUrl(f).url)).size).toBe(1);
  });

  it('reports host and origin (the robots.txt scope)', () => {
    expect(canonicalizeCrawlUrl('HTTP://WWW.Example.com:8080/a?b')).toEqual({ url: 'http://www.example.com:8080/a?b', host: 'www.example.com', origin: 'http://www.example.com:8080' });
  });

  it('resolves against a base', () => {
    expect(canonicalizeCrawlUrl('../x?b=1&a=2', 'http://a.test/d/e/').url).toBe('http://a.test/d/x?a=2&b=1');
  });

  it('refuses what the guard refuses on shape, with its codes', () => {
    const code = (raw: string): string => {
      try {
        canonicalizeCrawlUrl(raw);
      } catch (err) {
        expect(err).toBeInstanceOf(FusionError);
        return (err as FusionError).code;
      }
      return 'ok';
    };
    expect(code('ftp://a.test/x')).toBe('unsupported_scheme');
    expect(code('not a url')).toBe('invalid_url');
    expect(code('http://user:pw@a.test/')).toBe('invalid_url');
  });

  it('sortQuery is stable for equal keys and values and keeps the encoding', () => {
    expect(sortQuery('?b=%2F&a=&a')).toBe('?a&a=&b=%2F');
    expect(sortQuery('')).toBe('');
  });
});
