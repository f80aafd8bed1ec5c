import { describe, it, expect } from 'vitest';
import {
  BLOCKED_HOSTNAMES,
  METADATA_HOSTNAMES,
  SOURCE_URL_MESSAGES as M,
  canonicalizeSourceUrl,
  isBlockedHostname,
} from '../../../src/contracts/source-url.js';

function reasonOf(raw: string): string {
  const result = canonicalizeSourceUrl(raw);
  if (result.ok) throw new Error(`expected ${raw} to be rejected, got ${result.url}`);
  return result.reason;
}

function urlOf(raw: string): string {
  const result = canonicalizeSourceUrl(raw);
  if (!result.ok) throw new Error(`expected ${raw} to be accepted, got ${result.reason}`);
  return result.url;
}

describe('canonicalizeSourceUrl: docs/behaviour.md#e1 vectors', () => {
  it('HTTPS://Example.COM:443/a?q=1#frag → https://example.com/a?q=1', () => {
    expect(canonicalizeSourceUrl('HTTPS://Example.COM:443/a?q=1#frag')).toEqual({
      ok: true,
      url: 'https://example.com/a?q=1',
      host: 'example.com',
    });
  });

  it('HTTPS://Example.COM/a#frag → https://example.com/a', () => {
    expect(urlOf('HTTPS://Example.COM/a#frag')).toBe('https://example.com/a');
  });

  it.each(['http://2130706433/', 'http://0x7f.1/', 'http://127.1/'])(
    '%s is blocked (WHATWG makes it 127.0.0.1)',
    (raw) => {
      expect(reasonOf(raw)).toBe('fusion research source URL must be public, not private/reserved');
    },
  );

  it('https://example.com./a has the same canonical form as https://example.com/a', () => {
    expect(urlOf('https://example.com./a')).toBe('https://example.com/a');
    expect(urlOf('https://example.com./a')).toBe(urlOf('https://example.com/a'));
  });
});

describe('canonicalizeSourceUrl: steps in order, with the original messages', () => {
  it.each(['http://', 'notaurl', 'http://[::1', 'https://xn--/', 'http://exa%zzmple.com/'])('malformed %j', (raw) => {
    expect(reasonOf(raw)).toMatch(/^fusion research declared source URL is malformed: /);
  });

  it('malformed carries the parser detail', () => {
    expect(reasonOf('notaurl')).toBe('fusion research declared source URL is malformed: Invalid URL');
  });

  it.each(['https://user@example.com/', 'https://:pw@example.com/', 'https://user:pw@example.com/'])(
    'credentials %s',
    (raw) => {
      expect(reasonOf(raw)).toBe('fusion research source URL must not contain credentials');
    },
  );

  it('credentials are checked before the scheme', () => {
    expect(reasonOf('ftp://user:pw@example.com/')).toBe(M.credentials);
  });

  it.each(['ftp://example.com/', 'file:///etc/passwd', 'javascript:alert(1)', 'data:text/plain,x', 'ws://example.com/'])(
    'scheme %s',
    (raw) => {
      expect(reasonOf(raw)).toBe('fusion research source URL must use http or https');
    },
  );

  it('drops the fragment, lowercases the host and keeps the query order and path case', () => {
    expect(urlOf('https://EXAMPLE.com/%7EFoo/Bar?b=2&a=1&b=1#Section')).toBe('https://example.com/%7EFoo/Bar?b=2&a=1&b=1');
    expect(urlOf('https://example.com/a?#')).toBe('https://example.com/a?');
  });

  it('strips every trailing dot of the host', () => {
    expect(canonicalizeSourceUrl('https://Example.COM../x')).toEqual({ ok: true, url: 'https://example.com/x', host: 'example.com' });
  });

  it('unbrackets IPv6 in the returned host but keeps brackets in the URL', () => {
    expect(canonicalizeSourceUrl('https://[2606:4700:4700::1111]:443/p')).toEqual({
      ok: true,
      url: 'https://[2606:4700:4700::1111]/p',
      host: '2606:4700:4700::1111',
    });
    expect(canonicalizeSourceUrl('http://[2606:4700:4700:0:0:0:0:1111]/').ok).toBe(true);
  });

  it('maps IDN hosts to punycode', () => {
    expect(canonicalizeSourceUrl('https://Bücher.example/')).toEqual({
      ok: true,
      url: 'https://xn--bcher-kva.example/',
      host: 'xn--bcher-kva.example',
    });
  });

  it.each([
    'http://localhost/', 'http://LOCALHOST/', 'http://localhost./', 'http://localhost:8080/x', 'http://foo.localhost/',
    'http://a.b.LOCALHOST./', 'http://metadata/', 'http://metadata.local/', 'http://metadata.google.internal/',
    'http://Metadata.Google.Internal./computeMetadata/v1/', 'http://metadata.goog/', 'http://instance-data/',
    'http://instance-data.ec2.internal/latest/meta-data/', 'http://%6cocalhost/',
  ])('blocks localhost/metadata name %s', (raw) => {
    expect(reasonOf(raw)).toBe('fusion research source URL must be public, not localhost/metadata');
  });

  it.each(['http://localhost.example.com/', 'http://notlocalhost/', 'http://metadata.example/', 'http://mylocalhost.com/'])(
    'does not block look-alike %s',
    (raw) => {
      expect(canonicalizeSourceUrl(raw).ok).toBe(true);
    },
  );

  it.each([
    'http://127.0.0.1/', 'http://127.0.0.1./', 'http://0/', 'http://0.0.0.0/', 'http://017700000001/',
    'http://0x7f000001/', 'http://10.0.0.1/', 'http://192.168.1.1:8080/', 'http://172.16.0.1/',
    'http://169.254.169.254/latest/meta-data/', 'http://100.64.0.1/', 'http://168.63.129.16/', 'http://192.88.99.1/',
    'http://255.255.255.255/', 'http://224.0.0.1/', 'http://[::1]/', 'http://[::]/', 'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:8.8.8.8]/', 'http://[::127.0.0.1]/', 'http://[64:ff9b::8.8.8.8]/', 'http://[2002:c0a8:101::1]/',
    'http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/', 'http://[fd00:ec2::254]/', 'http://[fe80::1]/',
    'http://[FC00::1]/', 'http://[fec0::1]/', 'http://[ff02::1]/', 'http://[2001:db8::1]/', 'http://%31%32%37.0.0.1/',
  ])('blocks private/reserved literal %s', (raw) => {
    expect(reasonOf(raw)).toBe('fusion research source URL must be public, not private/reserved');
  });

  it('accepts public IP literals', () => {
    expect(urlOf('http://8.8.8.8:80/')).toBe('http://8.8.8.8/');
    expect(urlOf('http://[2001:4860:4860::8888]/dns')).toBe('http://[2001:4860:4860::8888]/dns');
  });

  it('drops default ports only', () => {
    expect(urlOf('http://example.com:80/')).toBe('http://example.com/');
    expect(urlOf('https://example.com:443/')).toBe('https://example.com/');
    expect(urlOf('https://example.com:0443/')).toBe('https://example.com/');
    expect(urlOf('http://example.com:443/')).toBe('http://example.com:443/');
    expect(urlOf('https://example.com:80/')).toBe('https://example.com:80/');
    expect(urlOf('https://example.com:8443/a')).toBe('https://example.com:8443/a');
  });

  it('is idempotent', () => {
    for (const raw of ['HTTPS://Example.COM:443/a?q=1#frag', 'https://Bücher.example./x?y', 'http://[2606:4700::1]:80/']) {
      const once = urlOf(raw);
      expect(urlOf(once)).toBe(once);
    }
  });
});

describe('canonicalizeSourceUrl: extra rejections', () => {
  it('limits the raw URL to 8192 UTF-8 bytes', () => {
    const base = 'https://example.com/';
    expect(canonicalizeSourceUrl(base + 'a'.repeat(8192 - base.length)).ok).toBe(true);
    expect(reasonOf(base + 'a'.repeat(8193 - base.length))).toBe('fusion research source URL is longer than 8192 bytes');
    // 'é' is two bytes: 4087 of them plus the 20-byte prefix is 8194 bytes but only 4107 characters.
    expect(reasonOf(base + 'é'.repeat(4087))).toBe(M.tooLong);
  });

  it.each([
    ['space in path', 'https://example.com/a b'],
    ['leading space', ' https://example.com/'],
    ['trailing newline', 'https://example.com/\n'],
    ['tab inside host', 'https://exa\tmple.com/'],
    ['CR LF', 'https://example.com/\r\nX-Injected: 1'],
    ['NUL', 'https://example.com/\u0000'],
    ['DEL', 'https://example.com/\u007f'],
    ['C1 NEL', 'https://example.com/\u0085'],
    ['no-break space', 'https://example.com/\u00a0'],
    ['line separator', 'https://example.com/\u2028'],
    ['zero-width space', 'https://exa\u200bmple.com/'],
    ['right-to-left override', 'https://example.com/\u202e'],
    ['BOM', '\ufeffhttps://example.com/'],
    ['soft hyphen in host', 'https://exam\u00adple.com/'],
  ])('rejects %s', (_label, raw) => {
    expect(reasonOf(raw)).toBe('fusion research source URL contains whitespace or control characters');
  });

  it.each(['https://example.com\\@evil.com/', 'https://example.com/a\\b', 'http:\\\\example.com\\'])('rejects backslash in %j', (raw) => {
    expect(reasonOf(raw)).toBe('fusion research source URL contains a backslash');
  });

  it.each(['http://[fe80::1%25eth0]/', 'http://[fe80::1%eth0]/', 'https://user@[fe80::1%251]:8080/'])('rejects zone id in %s', (raw) => {
    expect(reasonOf(raw)).toBe('fusion research source URL host must not contain an IPv6 zone id');
  });

  it.each(['https://a..b/', 'https://.example.com/', 'http://a%2eb..c/'])('rejects empty label in %s', (raw) => {
    expect(reasonOf(raw)).toBe('fusion research source URL host has an empty label');
  });

  it.each(['http://./', 'http://.../'])('rejects a host that is only dots: %s', (raw) => {
    expect(reasonOf(raw)).toBe('fusion research source URL host is empty');
  });

  it('limits a DNS label to 63 characters', () => {
    expect(canonicalizeSourceUrl(`https://${'a'.repeat(63)}.example/`).ok).toBe(true);
    expect(reasonOf(`https://${'a'.repeat(64)}.example/`)).toBe('fusion research source URL host label exceeds 63 characters');
  });

  it('limits the host to 253 characters (trailing dot not counted)', () => {
    const label = 'a'.repeat(63);
    const host253 = `${label}.${label}.${label}.${'b'.repeat(61)}`;
    expect(host253).toHaveLength(253);
    expect(canonicalizeSourceUrl(`https://${host253}/`).ok).toBe(true);
    expect(canonicalizeSourceUrl(`https://${host253}./`).ok).toBe(true);
    expect(reasonOf(`https://${host253}b/`)).toBe('fusion research source URL host exceeds 253 characters');
  });
});

describe('isBlockedHostname and the exported lists', () => {
  it('lists the metadata names of docs/behaviour.md#e1', () => {
    expect([...METADATA_HOSTNAMES].sort()).toEqual([
      'instance-data', 'instance-data.ec2.internal', 'metadata', 'metadata.goog', 'metadata.google.internal', 'metadata.local',
    ]);
    expect(BLOCKED_HOSTNAMES).toContain('localhost');
  });

  it('normalises case and trailing dots itself, for reuse by the egress guard', () => {
    expect(isBlockedHostname('LOCALHOST.')).toBe(true);
    expect(isBlockedHostname('x.y.localhost')).toBe(true);
    expect(isBlockedHostname('metadata.google.internal..')).toBe(true);
    expect(isBlockedHostname('example.com')).toBe(false);
    expect(isBlockedHostname('localhost.example')).toBe(false);
  });
});
