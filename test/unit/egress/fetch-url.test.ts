import { describe, expect, it } from 'vitest';
import { parseFetchUrl } from '../../../src/egress/fetch-url.js';
import { canonicalizeSourceUrl } from '../../../src/contracts/source-url.js';
import { FusionError } from '../../../src/errors.js';

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(FusionError);
    return (err as FusionError).code;
  }
  return 'no error';
}

describe('parseFetchUrl (docs/behaviour.md#e3 URL rules)', () => {
  it('canonicalises the SPEC vector and drops the fragment', () => {
    const target = parseFetchUrl('HTTPS://Example.COM:443/a?q=1#frag');
    expect(target.canonical).toBe('https://example.com/a?q=1');
    expect(target.host).toBe('example.com');
    expect(target.ipFamily).toBe(0);
  });

  it('strips trailing dots, so example.com. duplicates example.com', () => {
    expect(parseFetchUrl('https://example.com./a').canonical).toBe('https://example.com/a');
    expect(parseFetchUrl('https://EXAMPLE.com../a').canonical).toBe('https://example.com/a');
  });

  it('trims surrounding whitespace and keeps query order', () => {
    expect(parseFetchUrl('  https://example.com/p?b=2&a=1  ').canonical).toBe('https://example.com/p?b=2&a=1');
  });

  it('keeps a non-default port and drops a default one', () => {
    expect(parseFetchUrl('http://example.com:80/').canonical).toBe('http://example.com/');
    expect(parseFetchUrl('http://example.com:8080/').canonical).toBe('http://example.com:8080/');
  });

  it.each(['not a url', 'http://', 'https://[::1', 'http://exa mple.com/', '//example.com/x', ''])('invalid_url: %j', (raw) => {
    expect(codeOf(() => parseFetchUrl(raw))).toBe('invalid_url');
  });

  it.each(['ftp://example.com/', 'file:///etc/passwd', 'javascript:alert(1)', 'data:text/html,hi', 'gopher://example.com/', 'ws://example.com/', 'mailto:a@example.com'])(
    'unsupported_scheme: %s',
    (raw) => {
      expect(codeOf(() => parseFetchUrl(raw))).toBe('unsupported_scheme');
    },
  );

  it('checks the scheme before credentials', () => {
    expect(codeOf(() => parseFetchUrl('ftp://user:pw@example.com/'))).toBe('unsupported_scheme');
  });

  it.each(['http://user@example.com/', 'http://:pw@example.com/', 'http://user:pw@example.com/', 'http://public.example@127.0.0.1/', 'https://example.com@evil.example/'])(
    'credentials (userinfo tricks) are invalid_url: %s',
    (raw) => {
      expect(codeOf(() => parseFetchUrl(raw))).toBe('invalid_url');
    },
  );

  it('decodes IPv4 shorthand the WHATWG way, leaving a dotted quad to classify', () => {
    for (const raw of ['http://2130706433/', 'http://0x7f.1/', 'http://127.1/', 'http://0177.0.0.1/', 'http://0x7f000001/', 'http://127.0.0.1./', 'http://%31%32%37.0.0.1/']) {
      const target = parseFetchUrl(raw);
      expect(target.host, raw).toBe('127.0.0.1');
      expect(target.ipFamily, raw).toBe(4);
    }
  });

  it('unbrackets IPv6 literals', () => {
    const target = parseFetchUrl('http://[::FFFF:127.0.0.1]:8080/x');
    expect(target.host).toBe('::ffff:7f00:1');
    expect(target.ipFamily).toBe(6);
    expect(target.canonical).toBe('http://[::ffff:7f00:1]:8080/x');
  });

  it('maps every URL failure on a redirect hop to redirect_blocked, naming the rule', () => {
    const base = new URL('http://origin.test/start');
    for (const [raw, rule] of [
      ['ftp://origin.test/file', 'unsupported_scheme'],
      ['http://user:pw@origin.test/', 'invalid_url'],
      ['http://[::1', 'invalid_url'],
    ] as const) {
      try {
        parseFetchUrl(raw, 2, base);
        expect.unreachable(raw);
      } catch (err) {
        expect((err as FusionError).code).toBe('redirect_blocked');
        expect((err as FusionError).details).toMatchObject({ hop: 2, rule });
      }
    }
  });

  it('resolves a relative Location against the current URL', () => {
    expect(parseFetchUrl('/b?x=1#f', 1, new URL('https://origin.test:8443/a/c')).canonical).toBe('https://origin.test:8443/b?x=1');
    expect(parseFetchUrl('d', 1, new URL('https://origin.test/a/c')).canonical).toBe('https://origin.test/a/d');
  });

  it('agrees with the source declaration canonical form (docs/behaviour.md#e1) for every URL both accept', () => {
    const corpus = [
      'HTTPS://Example.COM:443/a?q=1#frag',
      'https://example.com./a',
      'http://example.com:80/x?b=1&a=2',
      'https://example.com:8443/',
      'https://münchen.example/straße?q=ä',
      'http://93.184.216.34/',
      'http://[2606:2800:220:1:248:1893:25c8:1946]/',
      'https://example.com/a/../b/./c',
      'https://example.com',
      'https://example.com/%7Efoo',
    ];
    for (const raw of corpus) {
      const declared = canonicalizeSourceUrl(raw);
      expect(declared.ok, raw).toBe(true);
      if (declared.ok) expect(parseFetchUrl(raw).canonical, raw).toBe(declared.url);
    }
  });
});
