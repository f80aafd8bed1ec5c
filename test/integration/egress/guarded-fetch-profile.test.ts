/**
 * Per-call profiles of the one guard (fetch-profile.ts) against a loopback origin: the research
 * page profile and the robots.txt profile change headers, accepted types, caps, extraction and
 * links; a call without a profile keeps the broker's result shape exactly.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGuardedFetch, type GuardedFetch } from '../../../src/egress/guarded-fetch.js';
import { researchPageProfile, researchRobotsProfile, RESEARCH_ACCEPT_HEADER } from '../../../src/egress/fetch-profile.js';
import { captureLog, failure, ORIGIN_CIDR, ORIGIN_IP, startHttpOrigin, type Listener } from './origin.js';

let origin: Listener;
let fetch: GuardedFetch;
const logs = captureLog();
const PAGE = '<html><head><base href="/base/"><script>var secret = 1;</script></head><body><h1>T</h1><p><a href="rel">r</a> <a href="https://x.test/abs#f">a</a> <a href="mailto:m@x">m</a></p></body></html>';

beforeAll(async () => {
  origin = await startHttpOrigin((req, res) => {
    switch (req.url) {
      case '/page':
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
        return;
      case '/md':
        res.writeHead(200, { 'content-type': 'text/markdown' }).end('# md');
        return;
      case '/big':
        res.writeHead(200, { 'content-type': 'text/plain' }).end('x'.repeat(5000));
        return;
      case '/robots-octet':
        res.writeHead(200, { 'content-type': 'application/octet-stream' }).end('User-agent: *\nDisallow: /a\n');
        return;
      case '/robots-untyped':
        res.writeHead(200).end('User-agent: *\n');
        return;
      case '/robots-huge': {
        const line = `Disallow: /${'y'.repeat(88)}\n`; // 100 bytes per line
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(line.length * 6000) }).end(line.repeat(6000));
        return;
      }
      case '/moved':
        res.writeHead(301, { location: '/page#frag', 'content-type': 'text/plain' }).end('unread body');
        return;
      case '/slow': // a slow origin is the subject here
        setTimeout(() => res.writeHead(200, { 'content-type': 'text/plain' }).end('late'), 3000).unref();
        return;
      default:
        res.writeHead(404).end();
    }
  });
  fetch = createGuardedFetch({ log: logs.log, resolveOverrides: new Map([['origin.test', ORIGIN_IP]]), allowCidrs: [ORIGIN_CIDR] });
});

afterAll(async () => {
  await fetch.close();
  await origin.close();
});

const url = (path: string): string => `http://origin.test:${String(origin.port)}${path}`;
const page = (maxResponseBytes = 1 << 20, deadlineMs = 10_000) => researchPageProfile({ userAgent: 'FluxusResearchBot', maxResponseBytes, deadlineMs });

describe('research page profile', () => {
  it('sends its User-Agent and Accept, extracts text without scripts and returns absolute http(s) links', async () => {
    const result = await fetch({ url: url('/page'), extract: 'markdown', profile: page() });
    expect(origin.headers.at(-1)).toMatchObject({ 'user-agent': 'FluxusResearchBot', accept: RESEARCH_ACCEPT_HEADER, 'accept-encoding': 'identity' });
    expect(result.format).toBe('text');
    expect(result.content).toBe('T\n\nr a m');
    expect(result.content).not.toContain('secret');
    expect(result.links).toEqual([url('/base/rel'), 'https://x.test/abs#f']);
    expect(logs.lines.at(-1)).toMatchObject({ msg: 'egress fetch done', profile: 'research' });
  });

  it('refuses Markdown (not a research type), which the broker profile accepts', async () => {
    const err = await failure(fetch({ url: url('/md'), profile: page() }));
    expect(err.code).toBe('unsupported_content_type');
    expect(err.message).toContain('only text/html, application/xhtml+xml and text/plain are fetched');
    expect((await fetch({ url: url('/md') })).content).toBe('# md');
  });

  it('applies its byte cap and its deadline per call', async () => {
    expect((await failure(fetch({ url: url('/big'), profile: page(4000) }))).code).toBe('response_too_large');
    expect((await fetch({ url: url('/big'), profile: page(5000) })).response_bytes).toBe(5000);
    const started = Date.now();
    const err = await failure(fetch({ url: url('/slow'), profile: page(1000, 300) }));
    expect(err.code).toBe('request_timeout');
    expect(err.message).toContain('300 ms');
    expect(Date.now() - started).toBeLessThan(2500);
  });

  it('returns a redirect instead of following it, with its shaped Location and no body', async () => {
    const seen = origin.requests.length;
    const result = await fetch({ url: url('/moved'), profile: page() });
    expect(result).toMatchObject({ status: 301, url: url('/moved'), final_url: url('/moved'), redirect: url('/page'), content: '', response_bytes: 0 });
    expect(origin.requests.slice(seen)).toEqual(['/moved']);
    expect((await fetch({ url: url('/moved') })).final_url).toBe(url('/page'));
  });

  it('a call without a profile keeps the broker result shape (no links, no cut)', async () => {
    const result = await fetch({ url: url('/page') });
    expect(Object.keys(result).sort()).toEqual(['content', 'content_sha256', 'content_type', 'final_url', 'format', 'response_bytes', 'status', 'truncated', 'url']);
    expect(result.format).toBe('markdown');
    expect(origin.headers.at(-1)?.['user-agent']).toMatch(/^fusion-supervisor/u);
  });
});

describe('robots.txt profile', () => {
  const robots = () => researchRobotsProfile({ userAgent: 'FluxusResearchBot', deadlineMs: 10_000 });

  it('reads any or no Content-Type as text', async () => {
    expect((await fetch({ url: url('/robots-octet'), profile: robots() })).content).toBe('User-agent: *\nDisallow: /a\n');
    expect((await fetch({ url: url('/robots-untyped'), profile: robots() })).content).toBe('User-agent: *\n');
  });

  it('cuts a body over 512 KiB at the last whole line instead of failing, even when its length is declared', async () => {
    const result = await fetch({ url: url('/robots-huge'), profile: robots() });
    expect(result.cut).toBe(true);
    expect(result.response_bytes).toBe(Math.floor((512 * 1024) / 100) * 100);
    expect(result.content.endsWith('\n')).toBe(true);
    expect(result.content.split('\n').every((line) => line === '' || line.length === 99)).toBe(true);
  });
});
