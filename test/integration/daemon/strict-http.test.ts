/**
 * The socket API is strict HTTP. Every reply, including Node-level refusals
 * (malformed request lines and headers, 431, 414, timeouts), is the JSON error envelope; bodies
 * need `Content-Type: application/json`; invalid UTF-8 and NUL in text fields are refused with
 * the field named. A seeded fuzz pass throws mutated requests at the real daemon socket.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INVESTIGATE_ARGS, ROOT, startStubDaemon, stopDaemon, tempHome, type DaemonProc } from './helpers.js';

interface RawReply {
  status: number;
  headers: Record<string, string>;
  body: string;
  raw: string;
}

/** Writes bytes to the socket and reads until the peer closes or a whole reply arrived. */
function rawRequest(socket: string, bytes: Buffer | string, waitMs = 5_000): Promise<RawReply | null> {
  return new Promise((resolve) => {
    const s = connect(socket);
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      resolve(parse(Buffer.concat(chunks).toString('utf8')));
    };
    const timer = setTimeout(finish, waitMs);
    s.on('data', (c: Buffer) => {
      chunks.push(c);
      const r = parse(Buffer.concat(chunks).toString('utf8'));
      if (r && Buffer.byteLength(r.body) >= Number(r.headers['content-length'] ?? Infinity)) finish();
    });
    s.on('end', finish);
    s.on('close', finish);
    s.on('error', finish);
    s.write(bytes);
  });
}

function parse(text: string): RawReply | null {
  const split = text.indexOf('\r\n\r\n');
  if (split < 0) return null;
  const [statusLine = '', ...lines] = text.slice(0, split).split('\r\n');
  const m = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine);
  if (!m) return null;
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status: Number(m[1]), headers, body: text.slice(split + 4), raw: text };
}

function envelopeOf(reply: RawReply | null): { code: string; message: string; details: Record<string, unknown> } {
  expect(reply, 'a reply').not.toBeNull();
  expect(reply!.headers['content-type'], reply!.raw.slice(0, 300)).toMatch(/^application\/json/);
  const body = JSON.parse(reply!.body) as { error: { code: string; message: string; details: Record<string, unknown> } };
  expect(typeof body.error.code).toBe('string');
  expect(typeof body.error.message).toBe('string');
  return body.error;
}

const submitBody = (args: unknown): string => JSON.stringify({ arguments: args, repo: ROOT });
const post = (path: string, body: Buffer | string, headers: string): Buffer => {
  const b = Buffer.isBuffer(body) ? body : Buffer.from(body);
  return Buffer.concat([Buffer.from(`POST ${path} HTTP/1.1\r\nhost: x\r\n${headers}content-length: ${b.length}\r\n\r\n`), b]);
};

let d: DaemonProc;
beforeAll(async () => {
  d = await startStubDaemon(tempHome(), 50);
});
afterAll(async () => {
  await stopDaemon(d);
});

describe('strict socket HTTP: every reply is the JSON envelope', () => {
  it('a garbage request line is 400 bad_request', async () => {
    const reply = await rawRequest(d.socket, 'GARBAGE\r\n\r\n');
    expect(reply!.status).toBe(400);
    expect(envelopeOf(reply).code).toBe('bad_request');
  });

  it('a malformed header line, a bad Content-Length and conflicting framing are 400 bad_request', async () => {
    for (const req of [
      'GET /v1/health HTTP/1.1\r\nBad Header Line\r\n\r\n',
      'POST /v1/tasks/investigate HTTP/1.1\r\ncontent-type: application/json\r\ncontent-length: abc\r\n\r\n{}',
      'POST /v1/tasks/investigate HTTP/1.1\r\ncontent-type: application/json\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n{}',
    ]) {
      const reply = await rawRequest(d.socket, req);
      expect(reply?.status, req).toBe(400);
      expect(envelopeOf(reply).code).toBe('bad_request');
    }
  });

  it('headers over 16 KiB are 431 headers_too_large; a URL over 8 KiB is 414 uri_too_long', async () => {
    const big = await rawRequest(d.socket, `GET /v1/health HTTP/1.1\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(big!.status).toBe(431);
    expect(envelopeOf(big).code).toBe('headers_too_large');
    const longUrl = await rawRequest(d.socket, `GET /v1/tasks?x=${'a'.repeat(10_000)} HTTP/1.1\r\n\r\n`);
    expect(longUrl!.status).toBe(414);
    expect(envelopeOf(longUrl).code).toBe('uri_too_long');
  });

  it('a request without Host over the Unix socket is answered (Host names nothing here)', async () => {
    const reply = await rawRequest(d.socket, 'GET /v1/health HTTP/1.1\r\nconnection: close\r\n\r\n');
    expect(reply!.status).toBe(200);
    expect((JSON.parse(reply!.body) as { ok?: unknown }).ok ?? true).toBeTruthy();
  });

  it('a body without Content-Type: application/json is 415 unsupported_media_type, nothing is created', async () => {
    const body = submitBody(INVESTIGATE_ARGS);
    for (const headers of ['', 'content-type: text/plain\r\n', 'content-type: application/json; charset=latin1\r\n']) {
      const reply = await rawRequest(d.socket, post('/v1/tasks/investigate', body, headers));
      expect(reply!.status, headers).toBe(415);
      const env = envelopeOf(reply);
      expect(env.code).toBe('unsupported_media_type');
      expect(env.details.field).toBe('content-type');
    }
    const list = (await d.client.call('GET', '/v1/tasks?limit=1000')) as { tasks: unknown[] };
    expect(list.tasks).toEqual([]);
    // The same body declared as JSON is accepted.
    const ok = await rawRequest(d.socket, post('/v1/tasks/investigate', body, 'content-type: application/json; charset=utf-8\r\n'));
    expect(ok!.status).toBe(202);
  });

  it('invalid UTF-8 and NUL in text fields are refused, naming the field', async () => {
    const bad = Buffer.concat([Buffer.from('{"arguments":{"objective":"a'), Buffer.from([0xc3, 0x28]), Buffer.from(`","background":[],"deliverable":"d"},"repo":${JSON.stringify(ROOT)}}`)]);
    const utf8 = await rawRequest(d.socket, post('/v1/tasks/investigate', bad, 'content-type: application/json\r\n'));
    expect(utf8!.status).toBe(400);
    const e1 = envelopeOf(utf8);
    expect(e1).toMatchObject({ code: 'invalid_input', details: { field: 'arguments.objective' } });
    expect(e1.message).toMatch(/arguments\.objective is not valid UTF-8/);

    const nul = await rawRequest(d.socket, post('/v1/tasks/investigate', submitBody({ ...INVESTIGATE_ARGS, background: ['ok', 'a\u0000b'] }), 'content-type: application/json\r\n'));
    expect(nul!.status).toBe(400);
    expect(envelopeOf(nul)).toMatchObject({ code: 'invalid_input', details: { field: 'arguments.background.1' } });
  });

  it('a client that hangs up mid-body is not logged as a daemon error (internal_error)', async () => {
    const before = d.stderr().length;
    for (let i = 0; i < 3; i++) {
      await new Promise<void>((resolve) => {
        const s = connect(d.socket);
        s.on('error', () => undefined);
        s.write('POST /v1/tasks/investigate HTTP/1.1\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"arguments":');
        // The hang-up is the subject: it comes a moment after the body began, as a client's would.
        setTimeout(() => {
          s.destroy();
          resolve();
        }, 100);
      });
    }
    // An absence: nothing marks "the daemon is done with the hang-ups", so this window is where
    // a wrongly logged internal_error would show (the health answer below proves the daemon is up).
    await new Promise((r) => setTimeout(r, 300));
    expect(d.stderr().slice(before)).not.toMatch(/internal_error/);
    const health = await rawRequest(d.socket, 'GET /v1/health HTTP/1.1\r\nconnection: close\r\n\r\n');
    expect(health!.status).toBe(200);
  });

  it('a body nested too deeply is 400 invalid_input, not a 500 stack overflow', async () => {
    const deep = `{"arguments":${'['.repeat(100_000)}${']'.repeat(100_000)},"repo":${JSON.stringify(ROOT)}}`;
    const reply = await rawRequest(d.socket, post('/v1/tasks/investigate', deep, 'content-type: application/json\r\n'));
    expect(reply!.status).toBe(400);
    expect(envelopeOf(reply)).toMatchObject({ code: 'invalid_input', details: { field: 'body' } });
    const health = await rawRequest(d.socket, 'GET /v1/health HTTP/1.1\r\nconnection: close\r\n\r\n');
    expect(health!.status).toBe(200);
  });

  it('a lone surrogate (\\ud800 escape, valid UTF-8 bytes) in a text field is refused, naming the field; nothing is created', async () => {
    // JSON escapes let a client send a string that is not Unicode text: anything writing it as
    // UTF-8 (prompts, task files) would silently turn it into U+FFFD.
    // Earlier tests' tasks may still be starting (packing their snapshot): count, don't assume none.
    const before = ((await d.client.call('GET', '/v1/tasks?limit=1000')) as { tasks: unknown[] }).tasks.length;
    for (const [body, field] of [
      [submitBody({ ...INVESTIGATE_ARGS, objective: 'a\ud800b' }), 'arguments.objective'],
      [submitBody({ ...INVESTIGATE_ARGS, background: ['ok', '\udc00'] }), 'arguments.background.1'],
      [JSON.stringify({ arguments: { ...INVESTIGATE_ARGS, ['k\ud83d']: 1 }, repo: ROOT }), 'arguments.k\ud83d'],
    ] as const) {
      const reply = await rawRequest(d.socket, post('/v1/tasks/investigate', body, 'content-type: application/json\r\n'));
      expect(reply!.status, field).toBe(400);
      expect(envelopeOf(reply)).toMatchObject({ code: 'invalid_input', details: { field } });
    }
    const after = ((await d.client.call('GET', '/v1/tasks?limit=1000')) as { tasks: unknown[] }).tasks.length;
    expect(after).toBe(before);
    // A well-formed pair is fine.
    const ok = await rawRequest(d.socket, post('/v1/tasks/investigate', submitBody({ ...INVESTIGATE_ARGS, objective: 'smile \ud83d\ude00' }), 'content-type: application/json\r\n'));
    expect(ok!.status).toBe(202);
  });

  it('headers that never finish are 408 client_timeout', async () => {
    const reply = await rawRequest(d.socket, 'GET /v1/health HTTP/1.1\r\nx-slow: 1\r\n', 15_000);
    expect(reply!.status).toBe(408);
    expect(envelopeOf(reply).code).toBe('client_timeout');
  }, 30_000);

  it('fuzz: 300 mutated requests each get the JSON envelope (or a JSON success), and the daemon stays up', async () => {
    // Deterministic (seeded) so a failure reproduces.
    let seed = 0x16_16_16;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const base = [
      Buffer.from('GET /v1/health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n'),
      post('/v1/tasks/investigate', submitBody(INVESTIGATE_ARGS), 'content-type: application/json\r\nconnection: close\r\n'),
      Buffer.from('GET /v1/tasks?state=queued&limit=5 HTTP/1.1\r\nconnection: close\r\n\r\n'),
    ];
    const junk = [0x00, 0x0a, 0x0d, 0x20, 0x3a, 0x7f, 0x80, 0xff, 0xc3, 0x22, 0x7b, 0x25];
    let replies = 0;
    for (let i = 0; i < 300; i++) {
      const req = Buffer.from(base[rand(base.length)]!);
      const edits = 1 + rand(4);
      let bytes = req;
      for (let e = 0; e < edits; e++) {
        const at = rand(bytes.length);
        const op = rand(3);
        if (op === 0) bytes[at] = junk[rand(junk.length)]!;
        else if (op === 1) bytes = Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + 1)]);
        else bytes = Buffer.concat([bytes.subarray(0, at), Buffer.from([junk[rand(junk.length)]!]), bytes.subarray(at)]);
      }
      const reply = await rawRequest(d.socket, bytes, 600);
      if (reply === null) continue; // the peer waited for more bytes (a mutated length): no reply to judge
      replies++;
      expect(reply.headers['content-type'], `#${i} ${JSON.stringify(bytes.toString('latin1'))} → ${reply.raw.slice(0, 200)}`).toMatch(/^application\/json/);
      const body = JSON.parse(reply.body) as { error?: { code?: unknown } };
      if (reply.status >= 400) expect(typeof body.error?.code, `#${i} ${reply.raw.slice(0, 200)}`).toBe('string');
    }
    expect(replies).toBeGreaterThan(150);
    const health = await d.client.raw('GET', '/v1/health');
    expect(health.status).toBe(200);
  }, 120_000);
});
