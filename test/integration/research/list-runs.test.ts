/**
 * GET /api/v1/research: a workspace's runs, newest first, paged by cursor, never another
 * workspace's; bad paging arguments are invalid_input naming the field; the client's listRuns
 * walks the same pages. Direct dispatch, SQLite research store, test crawler, origin on 127.0.0.2.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FusionClient } from '../../../src/client/index.js';
import { createMemoryResearchStore } from '../../../src/store/research-memory-store.js';
import { startHttpOrigin, type Listener } from '../egress/origin.js';
import { api, createKey, ORIGIN_HOST, startResearchDaemon, type ResearchDaemon } from './helpers.js';

describe('GET /api/v1/research lists the workspace runs', () => {
  let origin: Listener;
  let d: ResearchDaemon;
  let key: string;
  let otherKey: string;
  const created: string[] = [];

  beforeAll(async () => {
    origin = await startHttpOrigin((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html><body><p>Refill at a fixed rate.</p></body></html>');
    });
    d = await startResearchDaemon();
    key = await createKey(d.daemon.researchDbFile, 'ws_list');
    otherKey = await createKey(d.daemon.researchDbFile, 'ws_other');
    for (let i = 0; i < 5; i++) {
      const r = await api(d.base, 'POST', '/api/v1/research', { key, idem: `list-${String(i)}`, body: { query: `q${String(i)}`, sourceUrls: [`http://${ORIGIN_HOST}:${String(origin.port)}/${String(i)}`] } });
      expect(r.status).toBe(202);
      created.push(r.body.run.id as string);
    }
    await api(d.base, 'POST', '/api/v1/research', { key: otherKey, idem: 'other-0', body: { query: 'other', sourceUrls: [`http://${ORIGIN_HOST}:${String(origin.port)}/x`] } });
  });
  afterAll(async () => {
    await d?.close();
    await origin?.close();
  });

  it('pages newest first with nextCursor, and only the key workspace', async () => {
    const first = await api(d.base, 'GET', '/api/v1/research?limit=2', { key });
    expect(first.status).toBe(200);
    expect(first.body.limit).toBe(2);
    const seen: string[] = first.body.runs.map((r: { id: string }) => r.id);
    let cursor: string | null = first.body.nextCursor;
    expect(cursor).toBe(seen[1]);
    while (cursor !== null) {
      const page = await api(d.base, 'GET', `/api/v1/research?limit=2&cursor=${encodeURIComponent(cursor)}`, { key });
      expect(page.status).toBe(200);
      seen.push(...page.body.runs.map((r: { id: string }) => r.id));
      cursor = page.body.nextCursor;
    }
    expect(seen).toEqual([...created].reverse());
    const all = await api(d.base, 'GET', '/api/v1/research', { key });
    expect(all.body).toMatchObject({ limit: 20, nextCursor: null });
    expect(all.body.runs.map((r: { id: string }) => r.id)).toEqual([...created].reverse());
    expect(all.body.runs.every((r: { workspaceId: string; status: string }) => r.workspaceId === 'ws_list' && r.status === 'succeeded')).toBe(true);

    const other = await api(d.base, 'GET', '/api/v1/research', { key: otherKey });
    expect(other.body.runs.map((r: { query: string }) => r.query)).toEqual(['other']);
  });

  it('refuses bad paging arguments naming the field, another workspace cursor, and no key', async () => {
    for (const bad of ['0', '101', 'x', '-1', '1.5']) {
      const r = await api(d.base, 'GET', `/api/v1/research?limit=${bad}`, { key });
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ code: 'invalid_input', details: { field: 'limit' } });
      expect(r.body.error.message).toMatch(/^limit must be an integer from 1 to 100/);
    }
    const foreign = await api(d.base, 'GET', `/api/v1/research?cursor=${encodeURIComponent(created[0]!)}`, { key: otherKey });
    expect(foreign.status).toBe(400);
    expect(foreign.body.error).toMatchObject({ code: 'invalid_input', details: { field: 'cursor' } });
    expect((await api(d.base, 'GET', '/api/v1/research')).status).toBe(401);
    expect((await api(d.base, 'PUT', '/api/v1/research', { key })).status).toBe(405);
  });

  it('FusionClient.listRuns walks the same pages', async () => {
    const client = new FusionClient({ socketPath: d.daemon.config.socketPath, apiKey: key });
    try {
      const first = await client.listRuns({ limit: 3 });
      expect(first.runs.map((r) => r.id)).toEqual([...created].reverse().slice(0, 3));
      const second = await client.listRuns({ limit: 3, cursor: first.nextCursor! });
      expect(second.runs.map((r) => r.id)).toEqual([...created].reverse().slice(3));
      expect(second.nextCursor).toBeNull();
    } finally {
      await client.close();
    }
  });
});

describe('the memory research store lists runs in the same order', () => {
  it('newest first, ties by id, after a keyset', async () => {
    const store = createMemoryResearchStore();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { run } = await store.createRun({ id: `run_${String(i)}`, workspaceId: 'ws', idempotencyKey: `k${String(i)}`, payloadSha256: 'x', query: 'q', sourceUrls: ['https://example.com/'], limits: {} as never });
      ids.push(run.id);
    }
    const all = await store.listRuns('ws', 10);
    const expected = [...all].sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.id.localeCompare(a.id));
    expect(all.map((r) => r.id)).toEqual(expected.map((r) => r.id));
    expect(new Set(all.map((r) => r.id))).toEqual(new Set(ids));
    const after = await store.listRuns('ws', 10, { createdAt: all[0]!.createdAt, id: all[0]!.id });
    expect(after.map((r) => r.id)).toEqual(all.slice(1).map((r) => r.id));
    expect(await store.listRuns('nobody', 10)).toEqual([]);
  });
});
