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
import { BRAVE_HOST, PROVIDER_IP, SEARCH_KEY } from './fake-providers.js';

type Reflect = 'content-type' | 'content-encoding' | 'location' | 'malformed-json';
// Any 8 characters of the key, in any case (a header value may be lowercased on its way).
const KEY_PREFIX = new RegExp(SEARCH_KEY.slice(0, 8), 'iu');
let mode: Reflect = 'content-type';
let provider: Listener;
let guard: GuardedFetch;
const logLines: string[] = [];

function reflect(req: http.IncomingMessage, res: http.ServerResponse): void {
  const key = String(req.headers['x-subscription-token'] ?? '');
  if (mode === 'content-type') return void res.writeHead(200, { 'content-type': `text/plain; charset=${key}` }).end('{}');
  if (mode === 'content-encoding') return void res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': key }).end('{}');
  if (mode === 'location') return void res.writeHead(302, { location: `/login?k=${key}` }).end();
  res.writeHead(200, { 'content-type': 'application/json' }).end(`${key} is not a valid subscription`);
}

beforeAll(async () => {
  provider = await startHttpOrigin(reflect, PROVIDER_IP);
  const log = createLogger({ level: 'debug', destination: { write: (line: string) => void logLines.push(line) } });
  guard = createGuardedFetch({ log, resolveOverrides: parseResolveList([`${BRAVE_HOST}:${PROVIDER_IP}`], '--resolve'), allowCidrs: [`${PROVIDER_IP}/32`] });
});

afterAll(async () => {
  await guard.close();
  await provider.close();
});

async function failure(): Promise<FusionError> {
  const config = searchConfigFrom({ FUSION_SEARCH_PROVIDER: 'brave', FUSION_SEARCH_URL: `http://${BRAVE_HOST}:${String(provider.port)}`, FUSION_SEARCH_ALLOW_HOSTS: BRAVE_HOST, FUSION_SEARCH_API_KEY: SEARCH_KEY })!;
  const log = createLogger({ level: 'debug', destination: { write: (line: string) => void logLines.push(line) } });
  const err = await createWebSearch({ config, fetch: guard, log }).search('q').catch((e: unknown) => e);
  expect(err).toBeInstanceOf(FusionError);
  return err as FusionError;
}

describe('a provider that reflects the key', () => {
  it.each<Reflect>(['content-type', 'content-encoding', 'location', 'malformed-json'])('into its %s: the key is in no message, envelope or log line', async (m) => {
    mode = m;
    logLines.length = 0;
    const before = provider.requests.length;
    const err = await failure();
    // The provider did receive the key (the attack is real), then…
    expect(provider.requests.length).toBe(before + 1);
    expect(err.code).toBe('search_failed');
    expect(JSON.stringify(err.toEnvelope())).not.toMatch(KEY_PREFIX);
    expect(err.message).not.toMatch(KEY_PREFIX);
    expect(logLines.join('\n')).not.toMatch(KEY_PREFIX);
  });
});
