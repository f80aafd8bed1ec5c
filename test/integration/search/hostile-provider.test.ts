/**
 * A hostile search provider (loopback fake, reached through the guard's admin seams) that
 * reflects the request's key into places the guard and web search turn into text: a
 * Content-Type header, a redirect's Location, a malformed JSON body. The key must show in no
 * error message, envelope or log line (docs/security.md, the search provider key).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type http from 'node:http';
import { createLogger } from '../../../src/log.js';
import { createGuardedFetch, type GuardedFetch } from '../../../src/egress/guarded-fetch.js';
import { parseResolveList } from '../../../src/egress/resolve-list.js';
import { searchConfigFrom } from '../../../src/search/search-config.js';
import { createWebSearch } from '../../../src/search/web-search.js';
import { FusionError } from '../../../src/errors.js';
import { startHttpOrigin, type Listener } from '../egress/origin.js';
import { BRAVE_HOST, PROVIDER_IP, SEARCH_KEY, SENTINEL_IP, startSearchSentinel } from './fake-providers.js';

type Reflect = 'content-type' | 'content-encoding' | 'location' | 'location-scheme' | 'malformed-json';
type Hostile = Reflect | { redirect: number; to: (sentinelPort: number) => string } | 'drip' | 'endless';
// Any 8 characters of the key, in any case (a header value may be lowercased on its way).
const KEY_PREFIX = new RegExp(SEARCH_KEY.slice(0, 8), 'iu');
let mode: Hostile = 'content-type';
let sentinel: Listener;
let provider: Listener;
let guard: GuardedFetch;
const logLines: string[] = [];

function reflect(req: http.IncomingMessage, res: http.ServerResponse): void {
  const key = String(req.headers['x-subscription-token'] ?? '');
  if (typeof mode === 'object') return void res.writeHead(mode.redirect, { location: mode.to(sentinel.port) }).end();
  if (mode === 'drip' || mode === 'endless') {
    res.writeHead(200, { 'content-type': 'application/json' });
    // Never ends: a byte every 50 ms (drip) or 64 KiB as fast as the socket takes it (endless).
    const chunk = mode === 'drip' ? ' ' : ' '.repeat(64 * 1024);
    const timer = setInterval(() => void res.write(chunk), mode === 'drip' ? 50 : 1);
    res.on('close', () => clearInterval(timer));
    return;
  }
  if (mode === 'content-type') return void res.writeHead(200, { 'content-type': `text/plain; charset=${key}` }).end('{}');
  if (mode === 'content-encoding') return void res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': key }).end('{}');
  // The key as a Location's scheme: refused as a redirect to another scheme, which names it.
  if (mode === 'location-scheme') return void res.writeHead(302, { location: `${key}:x` }).end();
  if (mode === 'location') return void res.writeHead(302, { location: `/login?k=${key}` }).end();
  res.writeHead(200, { 'content-type': 'application/json' }).end(`${key} is not a valid subscription`);
}

beforeAll(async () => {
  provider = await startHttpOrigin(reflect, PROVIDER_IP);
  sentinel = await startSearchSentinel();
  const log = createLogger({ level: 'debug', destination: { write: (line: string) => void logLines.push(line) } });
  // The sentinel is reachable through the same seams: a request that went there would succeed.
  guard = createGuardedFetch({ log, resolveOverrides: parseResolveList([`${BRAVE_HOST}:${PROVIDER_IP}`], '--resolve'), allowCidrs: [`${PROVIDER_IP}/32`, `${SENTINEL_IP}/32`] });
});

afterAll(async () => {
  await guard.close();
  await Promise.all([provider.close(), sentinel.close()]);
});

async function failure(deadlineMs?: number): Promise<FusionError> {
  const config = searchConfigFrom({ FUSION_SEARCH_PROVIDER: 'brave', FUSION_SEARCH_URL: `http://${BRAVE_HOST}:${String(provider.port)}`, FUSION_SEARCH_ALLOW_HOSTS: BRAVE_HOST, FUSION_SEARCH_API_KEY: SEARCH_KEY })!;
  if (deadlineMs !== undefined) config.deadlineMs = deadlineMs;
  const log = createLogger({ level: 'debug', destination: { write: (line: string) => void logLines.push(line) } });
  const err = await createWebSearch({ config, fetch: guard, log }).search('q').catch((e: unknown) => e);
  expect(err).toBeInstanceOf(FusionError);
  return err as FusionError;
}

describe('a provider that reflects the key', () => {
  it.each<Reflect>(['content-type', 'content-encoding', 'location', 'location-scheme', 'malformed-json'])('into its %s: the key is in no message, envelope or log line', async (m) => {
    mode = m;
    logLines.length = 0;
    const before = provider.requests.length;
    const err = await failure();
    // The provider did receive the key (the attack is real), then…
    expect(provider.requests.length).toBe(before + 1);
    expect(err.code).toBe(m === 'location-scheme' ? 'redirect_blocked' : 'search_failed');
    expect(JSON.stringify(err.toEnvelope())).not.toMatch(KEY_PREFIX);
    expect(err.message).not.toMatch(KEY_PREFIX);
    expect(logLines.join('\n')).not.toMatch(KEY_PREFIX);
  });
});

describe('a provider that redirects or never finishes', () => {
  const targets: Array<[string, (port: number) => string]> = [
    ['relative', () => '/elsewhere'],
    ['same host, another port', (port) => `http://${BRAVE_HOST}:${String(port)}/res/v1/web/search?q=q`],
    ['an IP literal', (port) => `http://${SENTINEL_IP}:${String(port)}/`],
    ['https', () => `https://${BRAVE_HOST}/`],
    ['protocol-relative', (port) => `//${SENTINEL_IP}:${String(port)}/`],
  ];
  const cases = [300, 301, 302, 303, 307, 308].flatMap((status) => targets.map(([name, to]) => [status, name, to] as const));
  it.each(cases)('HTTP %i to %s is not followed: one request, the sentinel sees nothing', async (status, _name, to) => {
    mode = { redirect: status, to };
    const before = provider.requests.length;
    const err = await failure();
    expect(err).toMatchObject({ code: 'search_failed', details: { reason: 'redirect', http_status: status } });
    expect(provider.requests.length).toBe(before + 1);
    expect(sentinel.connections).toBe(0);
  });

  it('a body that drips forever ends at the search deadline', async () => {
    mode = 'drip';
    expect(await failure(500)).toMatchObject({ code: 'request_timeout' });
  });

  it('a body that never ends is cut at the 2 MiB cap', async () => {
    mode = 'endless';
    expect(await failure()).toMatchObject({ code: 'response_too_large' });
  });
});

describe('the way to the provider', () => {
  it('a DNS answer that changes after vetting is not consulted again: the key reaches the vetted address only', async () => {
    mode = 'malformed-json';
    const asked: string[] = [];
    // First answer: the provider; every later one: the sentinel (a rebinding resolver).
    const rebinding = async (host: string) => {
      asked.push(host);
      return Promise.resolve([{ address: asked.length === 1 ? PROVIDER_IP : SENTINEL_IP, family: 4 }]);
    };
    const log = createLogger({ level: 'silent' });
    const rebound = createGuardedFetch({ log, resolve: rebinding, allowCidrs: [`${PROVIDER_IP}/32`, `${SENTINEL_IP}/32`] });
    try {
      const config = searchConfigFrom({ FUSION_SEARCH_PROVIDER: 'brave', FUSION_SEARCH_URL: `http://${BRAVE_HOST}:${String(provider.port)}`, FUSION_SEARCH_ALLOW_HOSTS: BRAVE_HOST, FUSION_SEARCH_API_KEY: SEARCH_KEY })!;
      const before = provider.requests.length;
      await expect(createWebSearch({ config, fetch: rebound, log }).search('q')).rejects.toMatchObject({ code: 'search_failed' });
      expect(asked).toEqual([BRAVE_HOST]);
      expect(provider.requests.length).toBe(before + 1);
      expect(sentinel.connections).toBe(0);
    } finally {
      await rebound.close();
    }
  });

  it('HTTP_PROXY / HTTPS_PROXY / ALL_PROXY in the environment are not honoured: nothing goes to a proxy', async () => {
    mode = 'malformed-json';
    const saved = { HTTP_PROXY: process.env.HTTP_PROXY, HTTPS_PROXY: process.env.HTTPS_PROXY, ALL_PROXY: process.env.ALL_PROXY, http_proxy: process.env.http_proxy };
    const proxy = `http://${SENTINEL_IP}:${String(sentinel.port)}`;
    Object.assign(process.env, { HTTP_PROXY: proxy, HTTPS_PROXY: proxy, ALL_PROXY: proxy, http_proxy: proxy });
    try {
      const before = provider.requests.length;
      expect(await failure()).toMatchObject({ code: 'search_failed' });
      expect(provider.requests.length).toBe(before + 1);
      expect(sentinel.connections).toBe(0);
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });
});
