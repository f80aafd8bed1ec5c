/**
 * Transport behaviour: lying or malformed framing, deadlines (slow DNS, slow headers, slow drip,
 * slow extraction), aborts, TLS SNI from the name, and the socket peer check. Loopback only.
 */
import net from 'node:net';
import tls from 'node:tls';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createGuardedFetch, type GuardedFetch, type GuardedFetchOptions } from '../../../src/egress/guarded-fetch.js';
import { captureLog, failure, ORIGIN_CIDR, ORIGIN_IP, scriptedResolver, startHttpOrigin, startRawOrigin, type Listener } from './origin.js';
import { waitFor } from '../../helpers/wait.js';

const fetchers: GuardedFetch[] = [];
const listeners: Listener[] = [];

function make(extra: Partial<GuardedFetchOptions> = {}): GuardedFetch {
  const fetcher = createGuardedFetch({ log: captureLog().log, resolve: scriptedResolver({ 'origin.test': [[ORIGIN_IP]] }), allowCidrs: [ORIGIN_CIDR], ...extra });
  fetchers.push(fetcher);
  return fetcher;
}

async function raw(respond: (socket: net.Socket, head: string) => void): Promise<string> {
  const listener = await startRawOrigin(respond);
  listeners.push(listener);
  return `http://origin.test:${String(listener.port)}/`;
}

afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(fetchers.splice(0).map((f) => f.close()));
  await Promise.all(listeners.splice(0).map((l) => l.close()));
});

describe('framing', () => {
  it('a Content-Length bigger than the body (connection closed early) is network_error', async () => {
    const target = await raw((s) => s.end('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\r\nhello'));
    const err = await failure(make()({ url: target }));
    expect(err.code).toBe('network_error');
    expect(err.details.http_status).toBe(200);
  });

  it('a Content-Length smaller than the body: exactly the declared bytes are the body (documented)', async () => {
    const target = await raw((s) => s.end('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\n\r\nhello world'));
    const result = await make()({ url: target });
    expect(result).toMatchObject({ content: 'hel', response_bytes: 3 });
  });

  it.each([
    ['malformed', 'content-length: abc\r\n'],
    ['negative', 'content-length: -5\r\n'],
    ['conflicting duplicates', 'content-length: 5\r\ncontent-length: 6\r\n'],
    ['with transfer-encoding', 'content-length: 5\r\ntransfer-encoding: chunked\r\n'],
  ])('a %s Content-Length is network_error', async (_name, header) => {
    const target = await raw((s) => s.end(`HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n${header}\r\nhello`));
    expect((await failure(make()({ url: target }))).code).toBe('network_error');
  });

  it('a garbage response and a closed connection are network_error', async () => {
    expect((await failure(make()({ url: await raw((s) => s.end('NOT HTTP AT ALL\r\n\r\n')) }))).code).toBe('network_error');
    expect((await failure(make()({ url: await raw((s) => s.destroy()) }))).code).toBe('network_error');
  });

  it('a refused connection is network_error', async () => {
    const listener = await startRawOrigin(() => undefined);
    const port = listener.port;
    await listener.close();
    const err = await failure(make()({ url: `http://origin.test:${String(port)}/` }));
    expect(err.code).toBe('network_error');
    expect(err.details.cause_code).toBe('ECONNREFUSED');
  });
});

describe('the one deadline', () => {
  it('covers a slow DNS answer', async () => {
    const started = Date.now();
    const hanging = async (): Promise<never> => new Promise<never>(() => undefined);
    const err = await failure(make({ resolve: hanging, deadlineMs: 200 })({ url: 'http://slow-dns.test/' }));
    expect(err.code).toBe('request_timeout');
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('covers an origin that never answers', async () => {
    const target = await raw(() => undefined);
    const err = await failure(make({ deadlineMs: 300 })({ url: target }));
    expect(err.code).toBe('request_timeout');
  });

  it('covers a slow drip body', async () => {
    const target = await raw((s) => {
      s.write('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n');
      const timer = setInterval(() => {
        if (s.destroyed) clearInterval(timer);
        else s.write('1\r\na\r\n');
      }, 40);
      s.on('close', () => clearInterval(timer));
    });
    const started = Date.now();
    const err = await failure(make({ deadlineMs: 400 })({ url: target }));
    expect(err.code).toBe('request_timeout');
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('covers the extraction (a 4 MiB page cannot be converted inside a tiny deadline)', async () => {
    const section = '<section><h2>S</h2><p>Paragraph with <a href="/x">a link</a> and <em>emphasis</em>.</p><ul><li>a</li><li>b</li></ul><table><tr><td>1</td><td>2</td></tr></table></section>';
    const page = Buffer.from(`<html><body>${section.repeat(Math.floor((4 * 1024 * 1024 - 100) / section.length))}</body></html>`);
    let sent = false;
    const origin = await startHttpOrigin((_req, res) => {
      res.on('finish', () => {
        sent = true;
      });
      res.writeHead(200, { 'content-type': 'text/html' }).end(page);
    });
    listeners.push(origin);
    const fetcher = make({ deadlineMs: 700 });
    const started = Date.now();
    const err = await failure(fetcher({ url: `http://origin.test:${String(origin.port)}/` }));
    expect(err.code).toBe('request_timeout');
    expect(sent).toBe(true); // the transfer finished: the deadline hit during extraction
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('a caller abort is network_error with aborted:true', async () => {
    const target = await raw(() => undefined);
    const origin = listeners.at(-1)!;
    const controller = new AbortController();
    // Aborted once the request is with the origin (which never answers): mid-request.
    void waitFor('the request to reach the origin', () => origin.requests.length > 0).then(() => controller.abort());
    const err = await failure(make()({ url: target }, controller.signal));
    expect(err.code).toBe('network_error');
    expect(err.details.aborted).toBe(true);
  });
});

describe('TLS', () => {
  async function tlsServer(seen: Array<string | false>): Promise<number> {
    // No certificate at all: the SNI callback records the name and refuses the handshake.
    const server = tls.createServer({
      SNICallback: (servername, callback) => {
        seen.push(servername);
        callback(new Error('no certificate here'));
      },
    });
    const sockets = new Set<net.Socket>();
    server.on('connection', (socket: net.Socket) => {
      sockets.add(socket);
      if (!seen.includes(false)) seen.push(false); // a connection arrived (with or without SNI)
    });
    server.on('tlsClientError', () => undefined);
    await new Promise<void>((resolve) => server.listen(0, ORIGIN_IP, resolve));
    listeners.push({
      ip: ORIGIN_IP,
      port: 0,
      connections: 0,
      open: () => sockets.size,
      requests: [],
      headers: [],
      close: async () => {
        for (const socket of sockets) socket.destroy();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      },
    });
    return (server.address() as net.AddressInfo).port;
  }

  it('sends SNI = the URL host name while connecting to the pinned address', async () => {
    const seen: Array<string | false> = [];
    const port = await tlsServer(seen);
    const err = await failure(make()({ url: `https://origin.test:${String(port)}/` }));
    expect(err.code).toBe('network_error');
    expect(seen).toContain('origin.test');
  });

  it('sends no SNI for an IP-literal host', async () => {
    const seen: Array<string | false> = [];
    const port = await tlsServer(seen);
    const err = await failure(make()({ url: `https://${ORIGIN_IP}:${String(port)}/` }));
    expect(err.code).toBe('network_error');
    expect(seen).toEqual([false]);
  });
});

describe('the socket peer check', () => {
  it('refuses with blocked_address when the socket is connected anywhere but the pinned address', async () => {
    const origin = await startRawOrigin((s) => s.end('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 6\r\n\r\nLEAKED'));
    listeners.push(origin);
    // The guard pins 127.0.0.3; a faulty network layer delivers the socket to 127.0.0.2 instead.
    const realConnect = net.connect.bind(net);
    const spy = vi.spyOn(net, 'connect').mockImplementation(((options: net.NetConnectOpts) =>
      realConnect({ ...(options as net.TcpNetConnectOpts), host: ORIGIN_IP })) as typeof net.connect);
    const fetcher = make({ resolveOverrides: new Map([['origin.test', '127.0.0.3']]), allowCidrs: ['127.0.0.2/31'] });
    const err = await failure(fetcher({ url: `http://origin.test:${String(origin.port)}/` }));
    expect(spy).toHaveBeenCalledTimes(1);
    expect(spy.mock.calls[0]?.[0]).toMatchObject({ host: '127.0.0.3' });
    expect(err.code).toBe('blocked_address');
    expect(err.details).toMatchObject({ address: '127.0.0.3', remote_address: ORIGIN_IP });
    // Refused before a single byte was written: the origin saw a connection, never a request.
    await waitFor('the origin to see the connection closed', () => origin.connections === 1 && origin.open() === 0, 10_000);
    expect(origin.requests).toEqual([]);
  });
});
