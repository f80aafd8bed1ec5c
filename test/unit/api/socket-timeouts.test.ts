/**
 * The Unix socket has the request deadlines of the TCP listener: a stalled request body is
 * answered 408 and the connection destroyed (even when the peer never closes its side), while a
 * reply that takes longer than the deadline (a `wait`, an event stream) is not cut once its
 * request was received.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { closeServer, listenOnSocket } from '../../../src/api/socket-server.js';
import { HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS } from '../../../src/api/request-guard.js';
import { TCP_HEADERS_TIMEOUT_MS, TCP_REQUEST_TIMEOUT_MS } from '../../../src/api/tcp-listener.js';
import { connections, waitFor } from '../fakes/server-state.js';

const dir = mkdtempSync(join(tmpdir(), 'fusion-sock-timeouts-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));


describe('Unix socket request deadlines', () => {
  it('are the TCP listener\'s', () => {
    expect(TCP_HEADERS_TIMEOUT_MS).toBe(HEADERS_TIMEOUT_MS);
    expect(TCP_REQUEST_TIMEOUT_MS).toBe(REQUEST_TIMEOUT_MS);
    expect(REQUEST_TIMEOUT_MS).toBe(30_000);
  });

  it('a stalled body gets 408 and its connection is destroyed; a long reply to a received request is not cut', async () => {
    const path = join(dir, 'api.sock');
    const server = await listenOnSocket(path, (req, res) => {
      req.resume();
      // A `wait`-like reply: sent well after the request deadline.
      req.on('end', () => setTimeout(() => res.end('{"late":true}'), 1_200));
    }, { fallbackCaller: { uid: 0, gid: 0, pid: 0, groups: [] }, timeouts: { headersTimeoutMs: 300, requestTimeoutMs: 500 } });
    try {
      const started = Date.now();
      // The peer never closes its own side: a half-close would leave the connection open.
      const stalled = connect({ path, allowHalfOpen: true });
      let data = '';
      stalled.on('data', (c: Buffer) => (data += c.toString()));
      stalled.on('error', () => undefined);
      stalled.write('POST /v1/tasks/investigate HTTP/1.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"a');
      await waitFor(() => data.startsWith('HTTP/1.1 408'));
      expect(data).toContain('"code":"client_timeout"');
      expect(Date.now() - started).toBeLessThan(3_000);
      await waitFor(async () => (await connections(server)) === 0);
      stalled.destroy();

      const waiter = connect({ path });
      let reply = '';
      waiter.on('data', (c: Buffer) => (reply += c.toString()));
      waiter.write('POST /v1/tasks/x/wait HTTP/1.1\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}');
      await waitFor(() => reply.includes('{"late":true}'));
      expect(reply).toMatch(/^HTTP\/1\.1 200/);
      waiter.destroy();
    } finally {
      await closeServer(server, path);
    }
  });
});
