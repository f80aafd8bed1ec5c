/**
 * One socket caller must not exhaust the daemon's descriptors for every other caller by holding
 * connections open (event streams, waits): a non-privileged uid gets at most `maxConnections`
 * at once; the next is answered `busy` (429, JSON envelope) and closed; root and the daemon's uid
 * are not counted (docs/security.md#socket-callers). The caller is a fixed identity here (the
 * kernel's answer is the addon's test, test/unit/api/peer-cred.test.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { closeServer, listenOnSocket } from '../../../src/api/socket-server.js';
import type { CallerIdentity } from '../../../src/tasks/caller.js';
import { waitFor } from '../../helpers/wait.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A server whose requests are held open (like a followed event stream); each connection is `who()`. */
async function holdingServer(who: () => CallerIdentity, maxConnections: number): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'fusion-conn-bound-'));
  const path = join(dir, 'fusion.sock');
  const server: Server = await listenOnSocket(path, (_req, res) => res.writeHead(200, { 'content-type': 'application/x-ndjson' }).write('\n'), {
    identify: () => who(),
    perCaller: { maxConnections, unbounded: (c) => c.uid === 0 },
  });
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  cleanups.push(() => closeServer(server));
  return path;
}

/** Opens a connection, sends one request, resolves with the first bytes the server sends. */
function open(path: string): Promise<{ socket: Socket; first: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(path);
    cleanups.push(() => void socket.destroy());
    socket.once('error', reject);
    socket.once('connect', () => socket.write('GET /v1/events HTTP/1.1\r\n\r\n'));
    socket.once('data', (chunk: Buffer) => resolve({ socket, first: chunk.toString('utf8') }));
  });
}

const member = { uid: 4242, gid: 4242, pid: 1, groups: [] };

describe('open connections per socket caller', () => {
  it('refuses the connection over the bound with busy (429, JSON), and admits again once one closes', async () => {
    const path = await holdingServer(() => member, 3);
    const held = await Promise.all([open(path), open(path), open(path)]);
    for (const h of held) expect(h.first).toMatch(/^HTTP\/1\.1 200/);
    const refused = await open(path);
    expect(refused.first).toMatch(/^HTTP\/1\.1 429/);
    expect(refused.first).toMatch(/retry-after: 1/i);
    const body = JSON.parse(refused.first.slice(refused.first.indexOf('\r\n\r\n') + 4)) as { error: { code: string; details: Record<string, unknown> } };
    expect(body.error).toMatchObject({ code: 'busy', details: { scope: 'connections', limit: 3 } });
    await new Promise<void>((r) => {
      held[0]!.socket.once('close', () => r());
      held[0]!.socket.destroy();
    });
    // The server counts the closed connection off when it sees the close: admitted from then on.
    const admitted = await waitFor('a connection admitted once a held one closed', async () => {
      const next = await open(path);
      return /^HTTP\/1\.1 200/.test(next.first) ? next : false;
    }, 10_000);
    expect(admitted.first).toMatch(/^HTTP\/1\.1 200/);
  });

  it('does not count unbounded callers (root, the daemon\'s uid)', async () => {
    const path = await holdingServer(() => ({ uid: 0, gid: 0, pid: 1, groups: [] }), 1);
    const all = await Promise.all([open(path), open(path), open(path)]);
    for (const h of all) expect(h.first).toMatch(/^HTTP\/1\.1 200/);
  });
});

describe('a refused connection', () => {
  it('reaches no route, whatever it sends after its answer', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fusion-conn-bound-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'fusion.sock');
    let routed = 0;
    const server = await listenOnSocket(path, (_req, res) => {
      routed++;
      res.writeHead(200).write('\n');
    }, { identify: () => member, perCaller: { maxConnections: 0, unbounded: () => false } });
    cleanups.push(() => closeServer(server));
    const refused = await open(path);
    expect(refused.first).toMatch(/^HTTP\/1\.1 429/);
    // Written after the answer, before or after the server's close: either way it is never routed.
    const closed = new Promise<void>((r) => refused.socket.once('close', () => r()));
    refused.socket.on('error', () => undefined);
    refused.socket.write('POST /v1/tasks/investigate HTTP/1.1\r\ncontent-length: 0\r\n\r\n');
    await closed;
    expect(routed).toBe(0);
  });
});
