/**
 * The guarded fetch end to end against loopback origins (127.0.0.2 via the admin seams).
 * Content, headers, provenance, content types, HTTP errors, charsets, caps, logging.
 */
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createGuardedFetch, toFetchResponse, type GuardedFetch, type GuardedFetchOptions } from '../../../src/egress/guarded-fetch.js';
import { ACCEPT_HEADER } from '../../../src/egress/constants.js';
import { captureLog, failure, forbiddenResolver, ORIGIN_CIDR, ORIGIN_IP, scriptedResolver, startHttpOrigin, type CapturedLog, type Listener } from './origin.js';
import { waitFor } from '../../helpers/wait.js';

const GOLDEN =
  '<h1>Title</h1><p>Visit <a href="https://example.com/docs">docs</a>.</p><table><tr><th>Name</th><th>Value</th></tr><tr><td>alpha</td><td>one</td></tr></table><pre><code>const x = 1;</code></pre>';
const LATIN1 = Buffer.from([0x63, 0x61, 0x66, 0xe9]);
const BAD_UTF8 = Buffer.from([0x3c, 0x70, 0x3e, 0x61, 0xff, 0x62, 0x3c, 0x2f, 0x70, 0x3e]);
/** Whether the last /endless response was closed (its connection is gone). */
let endlessClosed = false;

let origin: Listener;
const fetchers: GuardedFetch[] = [];
let logs: CapturedLog;

function make(extra: Partial<GuardedFetchOptions> = {}): GuardedFetch {
  logs = captureLog();
  const fetcher = createGuardedFetch({
    log: logs.log,
    resolve: scriptedResolver({ 'origin.test': [[ORIGIN_IP]] }),
    allowCidrs: [ORIGIN_CIDR],
    ...extra,
  });
  fetchers.push(fetcher);
  return fetcher;
}

function url(path: string, host = 'origin.test'): string {
  return `http://${host}:${String(origin.port)}${path}`;
}

beforeAll(async () => {
  origin = await startHttpOrigin((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    switch (path) {
      case '/golden':
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(GOLDEN);
        return;
      case '/plain':
        res.writeHead(200, { 'content-type': 'text/plain' }).end('<b>plain</b> text\n');
        return;
      case '/md':
        res.writeHead(200, { 'content-type': 'text/markdown; charset=utf-8' }).end('# Already markdown\n');
        return;
      case '/xhtml':
        res.writeHead(200, { 'content-type': 'application/xhtml+xml' }).end('<html xmlns="http://www.w3.org/1999/xhtml"><body><h2>X</h2></body></html>');
        return;
      case '/json':
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"a":1}');
        return;
      case '/no-type':
        res.writeHead(200).end('untyped');
        return;
      case '/latin1':
        res.writeHead(200, { 'content-type': 'text/plain; charset=ISO-8859-1' }).end(LATIN1);
        return;
      case '/bad-utf8':
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(BAD_UTF8);
        return;
      case '/emoji':
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end('😀😀😀');
        return;
      case '/gzip':
        res.writeHead(200, { 'content-type': 'text/html', 'content-encoding': 'gzip' }).end(gzipSync(Buffer.from(GOLDEN)));
        return;
      case '/declared-huge':
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(5 * 1024 * 1024) });
        res.write('x'); // and never finishes: the guard must refuse on the header alone
        return;
      case '/endless': {
        res.writeHead(200, { 'content-type': 'text/plain' });
        const chunk = Buffer.alloc(64 * 1024, 0x61);
        const pump = (): void => {
          let room = true;
          while (!res.destroyed && room) room = res.write(chunk);
          if (!res.destroyed) res.once('drain', pump);
        };
        res.on('error', () => undefined);
        res.on('close', () => (endlessClosed = true));
        pump();
        return;
      }
      case '/404':
        res.writeHead(404, { 'content-type': 'text/html' }).end('<p>missing</p>');
        return;
      case '/500':
        res.writeHead(500, { 'content-type': 'text/plain' }).end('boom');
        return;
      case '/304':
        res.writeHead(304).end();
        return;
      default:
        res.writeHead(200, { 'content-type': 'text/plain' }).end(`path ${req.url ?? ''}`);
    }
  });
});

afterEach(async () => {
  await Promise.all(fetchers.splice(0).map((f) => f.close()));
});

afterAll(async () => {
  await origin.close();
});

describe('guarded fetch: success and provenance', () => {
  it('fetches the golden page as Markdown with the canonical url and raw-body provenance', async () => {
    const result = await make()({ url: `  http://Origin.TEST.:${String(origin.port)}/golden?b=2&a=1#frag  ` });
    expect(result).toMatchObject({
      url: `http://origin.test:${String(origin.port)}/golden?b=2&a=1`,
      final_url: `http://origin.test:${String(origin.port)}/golden?b=2&a=1`,
      status: 200,
      content_type: 'text/html',
      format: 'markdown',
      truncated: false,
      response_bytes: Buffer.byteLength(GOLDEN),
      content_sha256: createHash('sha256').update(GOLDEN).digest('hex'),
    });
    expect(result.content).toContain('# Title');
    expect(result.content).toContain('[docs](https://example.com/docs)');
    expect(result.content).toContain('| Name | Value |');
    expect(result.content).toContain('| alpha | one |');
    expect(result.content).toMatch(/```\nconst x = 1;\n```/u);
    expect(origin.requests.at(-1)).toBe('/golden?b=2&a=1');
  });

  it('sends GET with exactly the SPEC headers and Host from the name', async () => {
    await make()({ url: url('/plain') });
    const headers = origin.headers.at(-1);
    expect(headers?.accept).toBe(ACCEPT_HEADER);
    expect(headers?.accept).toBe('text/markdown, text/html;q=0.9, application/xhtml+xml;q=0.8, text/plain;q=0.7');
    expect(headers?.['accept-encoding']).toBe('identity');
    expect(headers?.['user-agent']).toBe('fusion-supervisor/0.1 (+guarded-fetch)');
    expect(headers?.host).toBe(`origin.test:${String(origin.port)}`);
    expect(headers?.cookie).toBeUndefined();
    expect(headers?.authorization).toBeUndefined();
  });

  it('honours a custom User-Agent', async () => {
    await make({ userAgent: 'fusion-supervisor/9 (test)' })({ url: url('/plain') });
    expect(origin.headers.at(-1)?.['user-agent']).toBe('fusion-supervisor/9 (test)');
  });

  it('extracts plain text when asked', async () => {
    const result = await make()({ url: url('/golden'), extract: 'text' });
    expect(result.format).toBe('text');
    expect(result.content).toContain('Title');
    expect(result.content).not.toContain('# Title');
  });

  it('returns text/plain and text/markdown as is', async () => {
    const fetcher = make();
    expect(await fetcher({ url: url('/plain'), extract: 'markdown' })).toMatchObject({ format: 'text', content: '<b>plain</b> text\n', content_type: 'text/plain' });
    expect(await fetcher({ url: url('/md'), extract: 'text' })).toMatchObject({ format: 'markdown', content: '# Already markdown\n', content_type: 'text/markdown' });
    expect(await fetcher({ url: url('/xhtml') })).toMatchObject({ format: 'markdown', content: '## X', content_type: 'application/xhtml+xml' });
  });

  it('reaches an allowed IP literal without consulting the resolver', async () => {
    const resolve = forbiddenResolver();
    const result = await make({ resolve })({ url: `http://${ORIGIN_IP}:${String(origin.port)}/plain` });
    expect(result.status).toBe(200);
    expect(resolve.calls).toEqual([]);
  });

  it('uses a static override instead of DNS', async () => {
    const resolve = forbiddenResolver();
    const result = await make({ resolve, resolveOverrides: new Map([['pinned.test', ORIGIN_IP]]) })({ url: url('/plain', 'pinned.test') });
    expect(result.final_url).toBe(url('/plain', 'pinned.test'));
    expect(resolve.calls).toEqual([]);
    expect(origin.headers.at(-1)?.host).toBe(`pinned.test:${String(origin.port)}`);
  });
});

describe('guarded fetch: response rules', () => {
  it('rejects application/json and a missing Content-Type with unsupported_content_type', async () => {
    const fetcher = make();
    const json = await failure(fetcher({ url: url('/json') }));
    expect(json.code).toBe('unsupported_content_type');
    expect(json.details.http_status).toBe(200);
    expect((await failure(fetcher({ url: url('/no-type') }))).code).toBe('unsupported_content_type');
  });

  it('refuses a compressed body (Content-Encoding gzip) with unsupported_content_type', async () => {
    const err = await failure(make()({ url: url('/gzip') }));
    expect(err.code).toBe('unsupported_content_type');
    expect(err.details.content_encoding).toBe('gzip');
  });

  it('maps non-2xx answers to http_error with the status kept', async () => {
    const fetcher = make();
    for (const [path, status] of [['/404', 404], ['/500', 500], ['/304', 304]] as const) {
      const err = await failure(fetcher({ url: url(path) }));
      expect(err.code).toBe('http_error');
      expect(err.details.http_status).toBe(status);
      expect(toFetchResponse(err)).toEqual({ ok: false, error: { code: 'http_error', message: `origin answered HTTP ${String(status)}`, http_status: status } });
    }
  });

  it('decodes the Content-Type charset (latin1) and fails bad UTF-8 with extraction_failed', async () => {
    const fetcher = make();
    expect((await fetcher({ url: url('/latin1') })).content).toBe('café');
    const err = await failure(fetcher({ url: url('/bad-utf8') }));
    expect(err.code).toBe('extraction_failed');
  });

  it('cuts output on whole code points: 😀😀😀 with cap 5 → 😀, provenance of the raw body', async () => {
    const result = await make({ maxOutputBytes: 5 })({ url: url('/emoji') });
    expect(result).toMatchObject({ content: '😀', truncated: true, response_bytes: 12 });
    expect(result.content_sha256).toBe(createHash('sha256').update('😀😀😀').digest('hex'));
  });

  it('refuses a declared Content-Length over the cap before reading', async () => {
    const started = Date.now();
    const err = await failure(make()({ url: url('/declared-huge') }));
    expect(err.code).toBe('response_too_large');
    expect(err.details).toMatchObject({ http_status: 200, content_length: 5 * 1024 * 1024 });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('stops an endless body at the 4 MiB cap', async () => {
    endlessClosed = false;
    const err = await failure(make()({ url: url('/endless') }));
    expect(err.code).toBe('response_too_large');
    expect(err.details.max_bytes).toBe(4 * 1024 * 1024);
    // The origin stopped: the connection is gone, so nothing more can be written on it.
    await waitFor('the origin to see the endless response closed', () => endlessClosed, 10_000);
  });

  it('applies a smaller configured response cap while streaming', async () => {
    const err = await failure(make({ maxResponseBytes: 10 })({ url: url('/plain') }));
    expect(err.code).toBe('response_too_large');
  });
});

describe('guarded fetch: logging and seams', () => {
  it('logs a loud warning at creation when an admin seam is set, and none otherwise', () => {
    make({ allowCidrs: [] });
    expect(logs.lines.filter((l) => l.level === 40)).toEqual([]);
    make({ resolveOverrides: new Map([['pinned.test', ORIGIN_IP]]) });
    const warning = logs.lines.find((l) => l.level === 40);
    expect(warning).toMatchObject({ component: 'egress', allowCidrs: [ORIGIN_CIDR], resolveOverrides: { 'pinned.test': ORIGIN_IP } });
    expect(String(warning?.msg)).toContain('ADMIN SEAMS');
  });

  it('logs one decision line per hop with host and resolved address, and a deny line on refusal', async () => {
    const fetcher = make();
    await fetcher({ url: url('/plain') });
    const allow = logs.lines.filter((l) => l.msg === 'egress decision' && l.allow === true);
    expect(allow).toHaveLength(1);
    expect(allow[0]).toMatchObject({ host: 'origin.test', address: ORIGIN_IP, via: 'dns', hop: 0, allowedBy: ORIGIN_CIDR });
    await failure(fetcher({ url: 'http://127.0.0.1:1/' }));
    const deny = logs.lines.filter((l) => l.msg === 'egress decision' && l.allow === false);
    expect(deny).toHaveLength(1);
    expect(deny[0]).toMatchObject({ code: 'blocked_address', host: '127.0.0.1', address: '127.0.0.1', reason: 'loopback' });
  });

  it('rejects invalid seams and limits at creation', () => {
    const log = captureLog().log;
    expect(() => createGuardedFetch({ log, allowCidrs: ['10.0.0.1/8'] })).toThrow(/host bits/u);
    expect(() => createGuardedFetch({ log, resolveOverrides: new Map([['localhost', ORIGIN_IP]]) })).toThrow(/always blocked/u);
    expect(() => createGuardedFetch({ log, deadlineMs: 0 })).toThrow(/deadlineMs/u);
    expect(() => createGuardedFetch({ log, userAgent: 'a\r\nX-Evil: 1' })).toThrow(/userAgent/u);
  });
});
