/**
 * `fusion fetch` through fetchCommand: output, JSON mode, exit codes. The origin is on
 * 127.0.0.2 and is reached only through --resolve/--allow-cidr; no test consults real DNS.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchArgsFrom, fetchCommand, FETCH_FLAGS, type FetchCommandArgs } from '../../../src/cli/fetch-command.js';
import { parseArgs } from '../../../src/config/args.js';
import { ORIGIN_CIDR, ORIGIN_IP, startHttpOrigin, type Listener } from './origin.js';

let origin: Listener;
const SEAMS = { resolve: [`origin.test:${ORIGIN_IP}`], allowCidrs: [ORIGIN_CIDR] };

async function run(args: Partial<FetchCommandArgs> & { url: string }): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await fetchCommand({ json: false, resolve: [], allowCidrs: [], ...args }, { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t) });
  return { code, stdout, stderr };
}

function url(path: string): string {
  return `http://origin.test:${String(origin.port)}${path}`;
}

beforeAll(async () => {
  origin = await startHttpOrigin((req, res) => {
    if (req.url === '/page') res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>Hello</h1><p>world</p>');
    else if (req.url === '/to-loopback') res.writeHead(302, { location: `http://127.0.0.1:${String(origin.port)}/` }).end();
    else res.writeHead(404, { 'content-type': 'text/plain' }).end('missing');
  });
});

afterAll(async () => {
  await origin.close();
});

describe('fusion fetch', () => {
  it('prints the content and exits 0; the admin seams produce a warning on stderr', async () => {
    const out = await run({ url: url('/page'), ...SEAMS });
    expect(out.code).toBe(0);
    expect(out.stdout).toBe('# Hello\n\nworld\n');
    expect(out.stderr).toContain('ADMIN SEAMS');
  });

  it('--extract text and --json print the whole result', async () => {
    const out = await run({ url: url('/page'), extract: 'text', json: true, ...SEAMS });
    expect(out.code).toBe(0);
    const result = JSON.parse(out.stdout) as Record<string, unknown>;
    expect(result).toMatchObject({ url: url('/page'), final_url: url('/page'), status: 200, format: 'text', content: 'Hello\n\nworld', truncated: false });
    expect(result.content_sha256).toMatch(/^[0-9a-f]{64}$/u);
  });

  it('exits 3 when refused by policy, printing the typed code', async () => {
    const blocked = await run({ url: `http://127.0.0.1:${String(origin.port)}/` });
    expect(blocked.code).toBe(3);
    expect(blocked.stderr).toMatch(/^fusion fetch: blocked_address: /u);
    expect((await run({ url: url('/to-loopback'), ...SEAMS })).code).toBe(3);
    const scheme = await run({ url: 'ftp://example.com/' });
    expect(scheme.code).toBe(3);
    expect(scheme.stderr).toContain('fusion fetch: unsupported_scheme: ');
  });

  it('--json prints an error envelope on stdout', async () => {
    const out = await run({ url: `http://localhost:${String(origin.port)}/`, json: true });
    expect(out.code).toBe(3);
    const body = JSON.parse(out.stdout) as { error: { code: string; message: string; details: Record<string, unknown> } };
    expect(body.error.code).toBe('blocked_address');
    expect(body.error.details).toMatchObject({ host: 'localhost' });
  });

  it('exits 4 on other fetch failures (http_error, invalid_url)', async () => {
    const missing = await run({ url: url('/nope'), ...SEAMS });
    expect(missing.code).toBe(4);
    expect(missing.stderr).toContain('fusion fetch: http_error: origin answered HTTP 404');
    expect((await run({ url: 'http://user:pw@example.com/' })).code).toBe(4);
  });

  it('exits 2 on usage errors (bad --resolve, bad --allow-cidr, bad --extract)', async () => {
    const resolve = await run({ url: url('/page'), resolve: ['origin.test'] });
    expect(resolve.code).toBe(2);
    expect(resolve.stderr).toContain('--resolve[0]');
    expect((await run({ url: url('/page'), allowCidrs: ['10.0.0.1/8'] })).code).toBe(2);
    expect((await run({ url: url('/page'), extract: 'html' as 'text' })).code).toBe(2);
  });

  it('fetchArgsFrom maps argv to arguments and rejects bad usage', () => {
    const args = fetchArgsFrom(parseArgs(['https://example.com/', '--extract', 'text', '--json', '--resolve', 'a.test:127.0.0.2', '--allow-cidr', '127.0.0.2/32'], FETCH_FLAGS));
    expect(args).toEqual({ url: 'https://example.com/', extract: 'text', json: true, resolve: ['a.test:127.0.0.2'], allowCidrs: ['127.0.0.2/32'] });
    expect(() => fetchArgsFrom(parseArgs([], FETCH_FLAGS))).toThrow(/exactly one URL/u);
    expect(() => fetchArgsFrom(parseArgs(['u', '--extract', 'html'], FETCH_FLAGS))).toThrow(/--extract/u);
  });
});
