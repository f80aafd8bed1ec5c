import { connect, type Socket } from 'node:net';
import { request } from 'node:http';
import { markAuthenticated } from '../../../src/api/tcp-admission.js';
import { describe, expect, it } from 'vitest';
import {
  assertListenAllowed, isLoopbackHost, listenOnTcp, parseListenAddress, TCP_HEADERS_TIMEOUT_MS, TCP_REQUEST_TIMEOUT_MS,
} from '../../../src/api/tcp-listener.js';
import { connections, waitFor } from '../fakes/server-state.js';

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
    } finally {
      server.close();
    }
  });

  it('closes an idle connection and a half-sent request after the headers timeout; a newcomer over the cap takes the slot of the longest idle one', async () => {
    const { server, port } = await listenOnTcp({ host: '127.0.0.1', port: 0 }, (_req, res) => res.end('ok'), { headersTimeoutMs: 500, maxConnections: 2, reservedForAuthenticated: 0, evictGraceMs: 0 });
    try {
      const idle = closedAfter(port);
      await waitFor(async () => (await connections(server)) === 1);
      const partial = closedAfter(port, 'GET /v1/health HTTP/1.1\r\nHost: x\r\n');
      await waitFor(async () => (await connections(server)) === 2);
      const third = closedAfter(port, 'GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      expect(await third.closed).toBeLessThan(1_000);
      expect(third.data()).toMatch(/^HTTP\/1\.1 200[^]*ok$/);
      // The silent connection was the longest idle: it made room.
      expect(await idle.closed).toBeLessThan(1_000);
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

/** One request from `localAddress` on a fresh connection: status and milliseconds taken. */
function timedRequest(port: number, localAddress: string, headers: Record<string, string> = {}): Promise<{ status: number; ms: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, localAddress, path: '/api/v1/research', headers, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: Date.now() - started }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('TCP listener under a lockout attack (silent and slow keep-alive connections from many addresses)', () => {
  it('a legitimate client is still served quickly; one address holds at most its share; a timed-out connection is destroyed, not half-closed', async () => {
    let slowSeen = 0;
    let slowWrites = 0;
    const limits = { maxConnections: 24, maxPerAddress: 4, reservedForAuthenticated: 8, headersTimeoutMs: 800, requestTimeoutMs: 800, probationMs: 1_000, evictGraceMs: 200 };
    const { server, port } = await listenOnTcp({ host: '127.0.0.1', port: 0 }, (req, res) => {
      if (req.headers.authorization === 'Bearer good') markAuthenticated(req);
      if (req.url === '/slow') slowSeen += 1;
      if (req.url === '/slow') return void setTimeout(() => res.end('slow'), 3_000);
      res.end('ok');
    }, limits);
    const attack: Socket[] = [];
    const timers: NodeJS.Timeout[] = [];
    try {
      // A peer that never closes its side (allowHalfOpen) must not keep its slot after the 408.
      const halfOpen = connect({ host: '127.0.0.1', port, localAddress: '127.0.0.9', allowHalfOpen: true });
      let halfData = '';
      halfOpen.on('data', (c: Buffer) => (halfData += c.toString()));
      halfOpen.on('error', () => undefined);
      attack.push(halfOpen);
      halfOpen.write('GET / HTTP/1.1\r\nHost: x\r\n');
      await waitFor(() => halfData.startsWith('HTTP/1.1 408'));
      await waitFor(async () => (await connections(server)) === 0);

      // N silent connections and N keep-alive connections sending a cheap request every 300 ms,
      // from 12 addresses: twice the listener's capacity.
      for (let a = 10; a < 22; a++) {
        for (let i = 0; i < 2; i++) {
          const silent = connect({ host: '127.0.0.1', port, localAddress: `127.0.0.${String(a)}` });
          silent.on('error', () => undefined);
          attack.push(silent);
          const slow = connect({ host: '127.0.0.1', port, localAddress: `127.0.0.${String(a)}` });
          slow.on('error', () => undefined);
          slow.on('data', () => undefined);
          attack.push(slow);
          timers.push(setInterval(() => {
            if (!slow.writable) return;
            slow.write('GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n');
            slowWrites += 1;
          }, 300));
        }
      }
      // Anonymous connections fill their share (the rest is the keyholders' reserve).
      await waitFor(async () => (await connections(server)) >= limits.maxConnections - limits.reservedForAuthenticated);
      // The attack is under way: every keep-alive attacker has sent at least two requests.
      await waitFor(() => slowWrites >= 2 * 24);
      // Repeatedly, during the attack: a keyholder and an anonymous health check are served at once.
      for (let round = 0; round < 5; round++) {
        const keyed = await timedRequest(port, '127.0.0.2', { authorization: 'Bearer good' });
        expect(keyed.status).toBe(200);
        expect(keyed.ms).toBeLessThan(1_000);
        const anonymous = await timedRequest(port, '127.0.0.3');
        expect(anonymous.status).toBe(200);
        expect(anonymous.ms).toBeLessThan(1_000);
      }
      expect(await connections(server)).toBeLessThanOrEqual(limits.maxConnections);

      // One address with every anonymous connection busy gets no more than its share: newcomers
      // enter on probation (at most as many again), and the next one is refused (busy).
      const held: Socket[] = [];
      for (let i = 0; i < limits.maxPerAddress; i++) {
        const s = connect({ host: '127.0.0.1', port, localAddress: '127.0.0.41' });
        s.on('error', () => undefined);
        s.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
        held.push(s);
        attack.push(s);
      }
      await waitFor(() => slowSeen === limits.maxPerAddress);
      for (let i = 0; i < limits.maxPerAddress; i++) {
        const s = connect({ host: '127.0.0.1', port, localAddress: '127.0.0.41' });
        s.on('error', () => undefined);
        attack.push(s);
      }
      const over = await timedRequest(port, '127.0.0.41');
      expect(over.status).toBe(429);
    } finally {
      for (const t of timers) clearInterval(t);
      for (const s of attack) s.destroy();
      server.closeAllConnections();
      server.close();
    }
  }, 30_000);
});
