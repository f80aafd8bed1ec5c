/**
 * Policy end to end: blocked hosts, redirects and DNS rebinding. Every origin is on 127.0.0.2
 * and a sentinel listens on 127.0.0.1 with the SAME port; 127.0.0.1 is never allowed, and the
 * sentinel's connection counter proves that no refused hop was ever dialled.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createGuardedFetch, type GuardedFetch, type GuardedFetchOptions } from '../../../src/egress/guarded-fetch.js';
import { captureLog, failure, ORIGIN_CIDR, ORIGIN_IP, scriptedResolver, SENTINEL_IP, startOriginWithSentinel, type Listener, type RecordingResolver } from './origin.js';

let origin: Listener;
let sentinel: Listener;
let port: string;
const fetchers: GuardedFetch[] = [];
let resolver: RecordingResolver;

const REDIRECT_STATUSES = [301, 302, 303, 307, 308, 300];

function make(extra: Partial<GuardedFetchOptions> = {}): GuardedFetch {
  resolver = scriptedResolver({
    'origin.test': [[ORIGIN_IP]],
    'other.test': [[ORIGIN_IP]],
    'sneaky.test': [[SENTINEL_IP]],
    'rebind-once.test': [[ORIGIN_IP], [SENTINEL_IP]],
    'rebind-hop.test': [[ORIGIN_IP], [SENTINEL_IP]],
    'mixed.test': [[ORIGIN_IP, SENTINEL_IP]],
    'mixed-v6.test': [[ORIGIN_IP, '::1']],
  });
  const fetcher = createGuardedFetch({ log: captureLog().log, resolve: resolver, allowCidrs: [ORIGIN_CIDR], ...extra });
  fetchers.push(fetcher);
  return fetcher;
}

function url(path: string, host = 'origin.test'): string {
  return `http://${host}:${port}${path}`;
}

beforeAll(async () => {
  ({ origin, sentinel } = await startOriginWithSentinel((req, res) => {
    const path = (req.url ?? '').split('?')[0] ?? '';
    const redirect = (location: string | undefined, status = 302): void => {
      res.writeHead(status, location === undefined ? {} : { location }).end();
    };
    const chain = /^\/chain\/(\d+)$/u.exec(path);
    if (chain !== null) {
      const n = Number(chain[1]);
      if (n === 0) res.writeHead(200, { 'content-type': 'text/plain' }).end('end of chain');
      else redirect(`/chain/${String(n - 1)}`, REDIRECT_STATUSES[n % REDIRECT_STATUSES.length]);
      return;
    }
    switch (path) {
      case '/ok':
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
        return;
      case '/to-loopback':
        redirect(`http://${SENTINEL_IP}:${port}/leak`);
        return;
      case '/to-loopback-encoded':
        redirect(`http://2130706433:${port}/leak`);
        return;
      case '/to-localhost':
        redirect(`http://localhost:${port}/leak`);
        return;
      case '/to-sneaky':
        redirect(`http://sneaky.test:${port}/leak`);
        return;
      case '/to-metadata':
        redirect(`http://metadata.google.internal:${port}/computeMetadata/v1/`);
        return;
      case '/to-mapped':
        redirect(`http://[::ffff:127.0.0.1]:${port}/leak`);
        return;
      case '/to-ftp':
        redirect('ftp://origin.test/file.txt');
        return;
      case '/to-file':
        redirect('file:///etc/passwd');
        return;
      case '/to-creds':
        redirect(`http://user:pw@origin.test:${port}/ok`);
        return;
      case '/to-unparsable':
        redirect('http://[::1');
        return;
      case '/no-location':
        redirect(undefined);
        return;
      case '/loop':
        redirect('/loop');
        return;
      case '/to-other':
        redirect(`http://other.test:${port}/ok#ignored`, 307);
        return;
      case '/redirect-with-body': {
        // A redirect whose body never ends: the guard must follow without reading it.
        res.writeHead(302, { location: '/ok', 'content-type': 'text/plain' });
        res.on('error', () => undefined);
        res.write(Buffer.alloc(1024 * 1024, 0x62));
        return;
      }
      case '/self-redirect':
        redirect('/ok');
        return;
      default:
        res.writeHead(404).end();
    }
  }));
  port = String(origin.port);
});

afterEach(async () => {
  await Promise.all(fetchers.splice(0).map((f) => f.close()));
  // HARD RULE check: nothing ever reached the blocked address.
  expect(sentinel.connections).toBe(0);
});

afterAll(async () => {
  await origin.close();
  await sentinel.close();
});

describe('blocked declared sources never connect', () => {
  it('a declared source that resolves to loopback fails with blocked_address', async () => {
    const before = origin.connections;
    const err = await failure(make()({ url: url('/leak', 'sneaky.test') }));
    expect(err.code).toBe('blocked_address');
    expect(err.details).toMatchObject({ host: 'sneaky.test', address: SENTINEL_IP, via: 'dns' });
    expect(resolver.calls).toEqual(['sneaky.test']);
    expect(origin.connections).toBe(before);
  });

  it.each([
    `http://127.0.0.1:PORT/`,
    `http://2130706433:PORT/`,
    `http://0x7f.1:PORT/`,
    `http://127.1:PORT/`,
    `http://0177.0.0.1:PORT/`,
    `http://127.0.0.1.:PORT/`,
    `http://localhost:PORT/`,
    `http://LocalHost.:PORT/`,
    `http://[::ffff:127.0.0.1]:PORT/`,
    `http://[::127.0.0.1]:PORT/`,
  ])('%s → blocked_address without DNS or connection', async (template) => {
    const err = await failure(make()({ url: template.replace('PORT', port) }));
    expect(err.code).toBe('blocked_address');
    expect(resolver.calls).toEqual([]);
  });

  it('a userinfo trick (http://public.example@127.0.0.1/) is invalid_url', async () => {
    const err = await failure(make()({ url: `http://public.example@${SENTINEL_IP}:${port}/` }));
    expect(err.code).toBe('invalid_url');
  });

  it('a mixed answer set is refused whole, even though its first answer is allowed', async () => {
    const before = origin.connections;
    for (const host of ['mixed.test', 'mixed-v6.test']) {
      const err = await failure(make()({ url: url('/ok', host) }));
      expect(err.code).toBe('blocked_address');
    }
    expect(origin.connections).toBe(before);
  });

  it('unsupported schemes fail before anything else', async () => {
    expect((await failure(make()({ url: `ftp://origin.test:${port}/` }))).code).toBe('unsupported_scheme');
    expect(resolver.calls).toEqual([]);
  });
});

describe('redirects', () => {
  it('follows 5 redirects (301/302/303/307/308) and reports the final URL; the resolver runs once per hop', async () => {
    const result = await make()({ url: url('/chain/5') });
    expect(result).toMatchObject({ url: url('/chain/5'), final_url: url('/chain/0'), status: 200, content: 'end of chain' });
    expect(resolver.calls).toEqual(Array(6).fill('origin.test'));
  });

  it('fails the 6th redirect response with redirect_limit', async () => {
    const seen = origin.requests.length;
    const err = await failure(make()({ url: url('/chain/6') }));
    expect(err.code).toBe('redirect_limit');
    expect(err.details.http_status).toBeTypeOf('number');
    expect(origin.requests.slice(seen)).toEqual(['/chain/6', '/chain/5', '/chain/4', '/chain/3', '/chain/2', '/chain/1']);
  });

  it('a redirect loop ends in redirect_limit', async () => {
    expect((await failure(make()({ url: url('/loop') }))).code).toBe('redirect_limit');
  });

  it('honours a configured redirect limit (0 = no redirects)', async () => {
    expect((await failure(make({ maxRedirects: 0 })({ url: url('/self-redirect') }))).code).toBe('redirect_limit');
  });

  it('follows a cross-host redirect and drops the Location fragment', async () => {
    const result = await make()({ url: url('/to-other') });
    expect(result.final_url).toBe(url('/ok', 'other.test'));
    expect(resolver.calls).toEqual(['origin.test', 'other.test']);
    expect(origin.headers.at(-1)?.host).toBe(`other.test:${port}`);
  });

  it('never reads a redirect body', async () => {
    const started = Date.now();
    const result = await make({ deadlineMs: 10_000 })({ url: url('/redirect-with-body') });
    expect(result.content).toBe('ok');
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it.each([
    ['/to-loopback', 'loopback literal'],
    ['/to-loopback-encoded', 'decimal-encoded loopback'],
    ['/to-localhost', 'localhost name'],
    ['/to-sneaky', 'a name resolving to loopback'],
    ['/to-metadata', 'a metadata name'],
    ['/to-mapped', 'IPv4-mapped loopback'],
    ['/to-ftp', 'a scheme change to ftp (documented: redirect_blocked, not unsupported_scheme)'],
    ['/to-file', 'a scheme change to file'],
    ['/to-creds', 'credentials'],
    ['/to-unparsable', 'an unparsable Location'],
  ])('%s (%s) fails with redirect_blocked, without connecting', async (path) => {
    const err = await failure(make()({ url: url(path) }));
    expect(err.code).toBe('redirect_blocked');
    expect(err.details).toMatchObject({ hop: 1, http_status: 302 });
  });

  it('a redirect without Location is http_error with the status kept', async () => {
    const err = await failure(make()({ url: url('/no-location') }));
    expect(err.code).toBe('http_error');
    expect(err.details.http_status).toBe(302);
  });
});

describe('DNS rebinding', () => {
  it('consults the resolver once and connects to the pinned first answer', async () => {
    const seen = origin.requests.length;
    const result = await make()({ url: url('/ok', 'rebind-once.test') });
    expect(result.content).toBe('ok');
    // The resolver's next answer would have been 127.0.0.1 (the sentinel): it was never asked.
    expect(resolver.calls).toEqual(['rebind-once.test']);
    expect(origin.requests.slice(seen)).toEqual(['/ok']);
  });

  it('re-vets every hop: a same-host redirect whose second answer rebinds to loopback is redirect_blocked', async () => {
    const err = await failure(make()({ url: url('/self-redirect', 'rebind-hop.test') }));
    expect(err.code).toBe('redirect_blocked');
    expect(err.details).toMatchObject({ address: SENTINEL_IP, hop: 1 });
    expect(resolver.calls).toEqual(['rebind-hop.test', 'rebind-hop.test']);
  });
});
