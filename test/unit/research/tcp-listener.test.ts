import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  assertListenAllowed, isLoopbackHost, listenOnTcp, parseListenAddress, TCP_HEADERS_TIMEOUT_MS, TCP_MAX_CONNECTIONS, TCP_REQUEST_TIMEOUT_MS,
} from '../../../src/api/tcp-listener.js';

describe('--listen address', () => {
  it('parses HOST:PORT, [V6]:PORT and localhost:PORT', () => {
    expect(parseListenAddress('127.0.0.1:8787')).toEqual({ host: '127.0.0.1', port: 8787 });
    expect(parseListenAddress('[::1]:0')).toEqual({ host: '::1', port: 0 });
    expect(parseListenAddress('localhost:80')).toEqual({ host: 'localhost', port: 80 });
    for (const bad of ['127.0.0.1', ':80', '127.0.0.1:65536', '::1:80', 'example.com:80', '127.0.0.1:8o']) {
      expect(() => parseListenAddress(bad), bad).toThrow(/--listen/);
    }
  });

  it('allows loopback only, unless listen-public', () => {
    for (const h of ['127.0.0.1', '127.9.9.9', '::1', 'localhost', '::ffff:127.0.0.1']) expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', '192.168.1.2', '2001:db8::1']) expect(isLoopbackHost(h), h).toBe(false);
    expect(() => assertListenAllowed({ host: '0.0.0.0', port: 1 }, false)).toThrow(/plain HTTP \(no TLS\).*--listen-public/s);
    expect(() => assertListenAllowed({ host: '0.0.0.0', port: 1 }, true)).not.toThrow();
    expect(() => assertListenAllowed({ host: '::1', port: 1 }, false)).not.toThrow();
  });

  it('an IPv4-compatible IPv6 address is not loopback (::127.0.0.1 is ::7f00:1, not ::ffff:127.0.0.1)', () => {
    for (const h of ['::127.0.0.1', '::7f00:1', '::10.0.0.1']) expect(isLoopbackHost(h), h).toBe(false);
    expect(() => assertListenAllowed(parseListenAddress('[::127.0.0.1]:1'), false)).toThrow(/--listen-public/);
    for (const h of ['::ffff:127.0.0.1', '::ffff:7f00:1', '::1%lo', '0:0:0:0:0:0:0:1']) expect(isLoopbackHost(h), h).toBe(true);
  });
});

/** Opens a raw connection, optionally sends `text`, and resolves when the server closes it (ms). */
function closedAfter(port: number, text?: string): { closed: Promise<number>; data: () => string } {
  const started = Date.now();
  let data = '';
  const socket = connect(port, '127.0.0.1', () => {
    if (text !== undefined) socket.write(text);
  });
  socket.on('data', (chunk: Buffer) => (data += chunk.toString()));
  const closed = new Promise<number>((resolve) => {
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(Date.now() - started));
  });
  setTimeout(() => socket.destroy(), 8_000).unref();
  return { closed, data: () => data };
}

describe('TCP listener connection bounds (an unauthenticated peer cannot hold connections forever)', () => {
  it('has bounded header and request timeouts and a connection cap by default', async () => {
    const { server } = await listenOnTcp({ host: '127.0.0.1', port: 0 }, (_req, res) => res.end('ok'));
    try {
      expect(server.headersTimeout).toBe(TCP_HEADERS_TIMEOUT_MS);
      expect(server.requestTimeout).toBe(TCP_REQUEST_TIMEOUT_MS);
      expect(server.maxConnections).toBe(TCP_MAX_CONNECTIONS);
    } finally {
      server.close();
    }
  });

  it('closes an idle connection and a half-sent request after the headers timeout, and refuses connections over the cap', async () => {
    const { server, port } = await listenOnTcp({ host: '127.0.0.1', port: 0 }, (_req, res) => res.end('ok'), { headersTimeoutMs: 500, maxConnections: 2 });
    try {
      const idle = closedAfter(port);
      const partial = closedAfter(port, 'GET /v1/health HTTP/1.1\r\nHost: x\r\n');
      await new Promise((resolve) => setTimeout(resolve, 100));
      const third = closedAfter(port, 'GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n');
      expect(await third.closed).toBeLessThan(1_000);
      expect(third.data()).toBe('');
      expect(await idle.closed).toBeLessThan(4_000);
      expect(await partial.closed).toBeLessThan(4_000);
      expect(partial.data()).toMatch(/^HTTP\/1\.1 408/);
    } finally {
      server.close();
    }
  });

  it('a reply that takes longer than the request timeout (a direct run) is not cut once the request was received', async () => {
    const { server, port } = await listenOnTcp(
      { host: '127.0.0.1', port: 0 },
      (req, res) => {
        req.resume();
        req.on('end', () => setTimeout(() => res.end('late'), 1_500));
      },
      { headersTimeoutMs: 300, requestTimeoutMs: 500 },
    );
    try {
      const res = await fetch(`http://127.0.0.1:${String(port)}/`, { method: 'POST', body: '{}' });
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('late');
    } finally {
      server.close();
    }
  });
});
