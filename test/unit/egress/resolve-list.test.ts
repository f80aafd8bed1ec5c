import { describe, expect, it } from 'vitest';
import { normalizeOverrides, parseResolveList } from '../../../src/egress/resolve-list.js';
import { FusionError } from '../../../src/errors.js';

function message(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(FusionError);
    expect((err as FusionError).code).toBe('invalid_input');
    return (err as FusionError).message;
  }
  return 'no error';
}

describe('parseResolveList (curl --resolve style admin seam)', () => {
  it('parses IPv4 and both IPv6 spellings, normalising the host', () => {
    const map = parseResolveList(['Origin.Test.:127.0.0.2', 'v6.test:[::1]', 'v6b.test:::1', 'full.test:2001:db8::5']);
    expect([...map]).toEqual([
      ['origin.test', '127.0.0.2'],
      ['v6.test', '::1'],
      ['v6b.test', '::1'],
      ['full.test', '2001:db8::5'],
    ]);
  });

  it('returns an empty map for no entries', () => {
    expect(parseResolveList([]).size).toBe(0);
  });

  it.each([
    ['origin.test', 'expected HOST:IP'],
    [':127.0.0.1', 'the host is empty'],
    ['origin.test:', 'the address is empty'],
    ['origin.test:not-an-ip', 'not an IPv4 dotted quad or an IPv6 address'],
    ['origin.test:127.1', 'not an IPv4 dotted quad'],
    ['origin.test:443:127.0.0.1', 'not an IPv4 dotted quad'],
    ['origin.test:[fe80::1%eth0]', 'zone id'],
    ['10.0.0.1:127.0.0.1', 'IP literal'],
    ['localhost:127.0.0.2', 'always blocked'],
    ['api.localhost:127.0.0.2', 'always blocked'],
    ['metadata.google.internal:127.0.0.2', 'always blocked'],
    ['bad host.test:127.0.0.2', 'not a DNS name'],
  ])('rejects %j clearly', (entry, why) => {
    const text = message(() => parseResolveList([entry], '--resolve'));
    expect(text).toContain('--resolve[0]');
    expect(text).toContain(why);
  });

  it('rejects a host given twice', () => {
    expect(message(() => parseResolveList(['a.test:127.0.0.2', 'A.test.:127.0.0.3']))).toContain('more than once');
  });

  it('validates programmatic maps with the same rules', () => {
    expect([...normalizeOverrides(new Map([['X.Test', '[::1]']]))]).toEqual([['x.test', '::1']]);
    expect(message(() => normalizeOverrides(new Map([['localhost', '127.0.0.2']])))).toContain('always blocked');
  });
});
