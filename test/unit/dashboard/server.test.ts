/**
 * The dashboard server on real loopback HTTP, over the real data adapter with stub sources and a
 * scripted peer uid (the /proc lookup itself is peer-uid.test.ts): who sees what, the Host
 * check, read-only methods, headers on every answer, odd paths, and the tarball route.
 */
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { createDashboardData, type DashboardSources } from '../../../src/dashboard/data.js';
import { CONTENT_SECURITY_POLICY, MAX_CONNECTIONS_PER_UID, allowedHosts, startDashboard, type DashboardServer } from '../../../src/dashboard/server.js';
import { ViewerRules } from '../../../src/dashboard/viewers.js';
import { closeServer } from '../../../src/http/http-util.js';
import { waitFor } from '../../helpers/wait.js';
import type { TaskRecord } from '../../../src/store/port.js';

const GROUP = 5000;
const MEMBER = 1001;
const OTHER_MEMBER = 1002;
const OUTSIDER = 2000;

function task(id: string, callerUid: number, objective: string): TaskRecord {
  return {
    id, workflow: 'investigate', state: 'completed', repoDir: '/srv/repo', canonicalInput: JSON.stringify({ request: { text: JSON.stringify({ objective }) } }),
    canonicalInputSha256: '', budgetPlan: '{}', options: {} as TaskRecord['options'], createdAt: '2026-01-01T00:00:00.000Z', updatedAt: '2026-01-01T00:01:00.000Z',
    error: null, usage: null, usageDelivered: false, resumeCount: 0, callerUid, bundleDigest: null,
  };
}

const MINE = `investigate-${'1'.repeat(32)}`;
const THEIRS = `investigate-${'2'.repeat(32)}`;
const TASKS = [task(MINE, MEMBER, 'alice objective'), task(THEIRS, OTHER_MEMBER, 'bob objective')];

const sources = {
  tasks: {
    find: async (id: string) => TASKS.find((t) => t.id === id) ?? null,
    list: async (q: { callerUid?: number; state?: string }) => TASKS.filter((t) => (q.callerUid === undefined || t.callerUid === q.callerUid) && (q.state === undefined || t.state === q.state)),
    readAnswer: async () => ({ answer: Buffer.from('the answer'), sha256: 'x' }),
  },
  store: {
    listAttempts: async () => [],
    getTaskTarball: async (id: string) => ({ taskId: id, sha256: 'a'.repeat(64), bytes: 4, manifestSha256: 'b'.repeat(64), signature: null, publicKeySha256: null, createdAt: '2026-01-01T00:02:00.000Z', data: Buffer.from(`tar:${id}`) }),
    getResult: async () => null,
    countTasksByState: async () => ({ completed: 2 }),
  },
  resultChecks: {},
  researchRuns: { listRuns: async () => [], getRun: async () => null, listSnapshots: async () => [], getDocument: async () => null },
  keys: { listKeys: async () => [], getKey: async () => null },
  queue: () => ({ queued: 0, running: 0 }),
  sandboxBackend: async () => 'bwrap',
  maintenanceRuns: () => [],
} as unknown as DashboardSources;

let dash: DashboardServer;
let peer: number | undefined = 0;

beforeAll(async () => {
  dash = await startDashboard({
    address: { host: '127.0.0.1', port: 0 },
    data: createDashboardData(sources),
    rules: new ViewerRules(4242, GROUP, async (uid) => (uid === MEMBER || uid === OTHER_MEMBER ? [uid, GROUP] : [uid])),
    userName: () => undefined,
    keys: sources.keys,
    log: silentLogger(),
    peerUid: () => peer,
  });
});
afterAll(async () => {
  await closeServer(dash.server);
});

interface Reply { status: number; headers: Record<string, string | string[] | undefined>; body: string }

function get(path: string, as: number | undefined, options: { method?: string; host?: string } = {}): Promise<Reply> {
  peer = as;
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: dash.port, path, method: options.method ?? 'GET', agent: false, headers: { host: options.host ?? `127.0.0.1:${dash.port}` } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('who sees what', () => {
  it('root and the daemon uid see every task', async () => {
    for (const uid of [0, 4242]) {
      const r = await get('/tasks', uid);
      expect(r.status).toBe(200);
      expect(r.body).toContain('alice objective');
      expect(r.body).toContain('bob objective');
    }
  });
  it('a socket-group member sees only its own tasks, and a foreign task, tarball or page reads as missing', async () => {
    const list = await get('/tasks', MEMBER);
    expect(list.body).toContain('alice objective');
    expect(list.body).not.toContain('bob objective');
    expect((await get(`/tasks/${MINE}`, MEMBER)).status).toBe(200);
    const foreign = await get(`/tasks/${THEIRS}`, MEMBER);
    expect(foreign.status).toBe(404);
    expect(foreign.body).not.toContain('bob objective');
    expect((await get(`/tasks/${THEIRS}/audit.tar`, MEMBER)).status).toBe(404);
    const own = await get(`/tasks/${MINE}/audit.tar`, MEMBER);
    expect(own.status).toBe(200);
    expect(own.body).toBe(`tar:${MINE}`);
    expect(own.headers['content-disposition']).toBe(`attachment; filename="${MINE}.tar"`);
    // Daemon-wide facts are not a member's to read.
    expect((await get('/', MEMBER)).body).not.toContain('bwrap');
  });
  it('a local user outside the group is refused everything but the static files', async () => {
    for (const path of ['/', '/tasks', `/tasks/${MINE}`, `/tasks/${MINE}/audit.tar`, '/research']) expect((await get(path, OUTSIDER)).status).toBe(403);
    expect((await get('/static/dashboard.css', OUTSIDER)).status).toBe(200);
  });
  it('a connection whose local user cannot be read is closed unanswered', async () => {
    await expect(get('/', undefined)).rejects.toThrow(/socket hang up|ECONNRESET/u);
  });
});

describe('the surface', () => {
  it('answers only to its own address in the Host header (DNS rebinding)', async () => {
    for (const host of ['evil.example', `evil.example:${dash.port}`, `127.0.0.1:${dash.port + 1}`, `127.0.0.1.nip.io:${dash.port}`]) {
      const r = await get('/tasks', 0, { host });
      expect(r.status).toBe(421);
      expect(r.body).not.toContain('objective');
    }
    expect((await get('/tasks', 0, { host: `localhost:${dash.port}` })).status).toBe(200);
    expect([...allowedHosts('::1', 8788)]).toEqual(['[::1]:8788', 'localhost:8788']);
  });
  it('is read-only: every other method is 405', async () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      const r = await get('/tasks', 0, { method });
      expect(r.status).toBe(405);
      expect(r.headers.allow).toBe('GET, HEAD');
    }
    const head = await get('/tasks', 0, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
  });
  it('sends the CSP and nosniff with every answer, errors and static files included', async () => {
    for (const [path, as] of [['/', 0], ['/nope', 0], ['/', OUTSIDER], ['/static/dashboard.js', 0], [`/tasks/${MINE}/audit.tar`, 0]] as const) {
      const r = await get(path, as);
      expect(r.headers['content-security-policy']).toBe(CONTENT_SECURITY_POLICY);
      expect(r.headers['x-content-type-options']).toBe('nosniff');
      expect(r.headers['x-frame-options']).toBe('DENY');
    }
    expect((await get('/static/dashboard.js', 0)).headers['content-type']).toBe('text/javascript; charset=utf-8');
  });
  it('answers odd paths without reaching a lookup', async () => {
    expect((await get('/tasks/%zz', 0)).status).toBe(400);
    expect((await get(`/${'a'.repeat(9000)}`, 0)).status).toBe(414);
    expect((await get('/tasks/..%2F..%2Fetc%2Fpasswd', 0)).status).toBe(404);
    expect((await get('/static/..%2F..%2Fpackage.json', 0)).status).toBe(404);
    expect((await get('/tasks?state=<script>', 0)).status).toBe(400);
    expect((await get(`/tasks/${MINE}/audit.tar/x`, 0)).status).toBe(404);
    expect((await get('/research/%00', 0)).status).toBe(404);
  });
});

/** A raw connection as `as`: what it received so far, and whether the server closed it. */
interface Raw { socket: Socket; received: () => string; closed: () => boolean }

async function rawAs(as: number, payload: string): Promise<Raw> {
  peer = as;
  const socket = connect(dash.port, '127.0.0.1');
  let text = '';
  let closed = false;
  socket.on('data', (d: Buffer) => (text += d.toString()));
  socket.on('error', () => undefined);
  socket.on('close', () => (closed = true));
  await new Promise<void>((r) => socket.once('connect', r));
  socket.write(payload);
  return { socket, received: () => text, closed: () => closed };
}

const answers = (text: string): number => (text.match(/^HTTP\/1\.1 /gmu) ?? []).length;

describe('holding connections', () => {
  const getLine = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${dash.port}\r\n\r\n`;

  it("closes a refused caller's connection after the answer: it keeps no slot alive", async () => {
    const raw = await rawAs(OUTSIDER, getLine('/'));
    await waitFor('the refused connection to close', raw.closed);
    expect(raw.received()).toMatch(/^HTTP\/1\.1 403 .*\r\nconnection: close\r\n/isu);
  });

  it('answers one request at a time: a pipelining client (no browser is one) is disconnected, not queued', async () => {
    // Thousands of pipelined requests per connection, never read, were each rendered and queued.
    const raw = await rawAs(0, getLine('/tasks').repeat(50));
    await waitFor('the pipelining connection to close', raw.closed);
    expect(answers(raw.received())).toBeLessThanOrEqual(1);
  });

  it(`holds at most ${MAX_CONNECTIONS_PER_UID} connections of one user other than root; over that, 429 and closed`, async () => {
    const held: Raw[] = [];
    try {
      for (let i = 0; i < MAX_CONNECTIONS_PER_UID; i++) {
        const raw = await rawAs(MEMBER, getLine('/tasks'));
        held.push(raw);
        await waitFor('the held connection to be answered', () => raw.received().includes('</html>'));
        expect(raw.received()).toMatch(/^HTTP\/1\.1 200 /u);
      }
      const over = await rawAs(MEMBER, getLine('/tasks'));
      await waitFor('the connection over the bound to close', over.closed);
      expect(over.received()).toMatch(/^HTTP\/1\.1 429 /u);
      expect(over.received()).not.toContain('alice objective');
      // Another user, and root, are not bound by the member's connections.
      expect((await get('/tasks', OTHER_MEMBER)).status).toBe(200);
      expect((await get('/tasks', 0)).status).toBe(200);
      // A member connection that closes gives its slot back.
      held.pop()!.socket.destroy();
      await waitFor('a slot to come back', async () => (await get('/tasks', MEMBER)).status === 200);
    } finally {
      for (const raw of held) raw.socket.destroy();
    }
  });
});
