/**
 * The TCP listener limits failed authentication per remote address (hostile
 * clients): after K bad keys within the window every research request from that address gets
 * 429 `rate_limited` with Retry-After, a valid key included, until the window passes; valid
 * requests never count, and the Unix socket (a local uid, named by the kernel) is not limited.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FusionClient } from '../../../src/client/index.js';
import { api, createKey, startResearchDaemon, type ResearchDaemon } from './helpers.js';

const WINDOW_MS = 2_000;

describe('research API over TCP: failed-authentication limit', () => {
  let d: ResearchDaemon;
  let key: string;
  beforeAll(async () => {
    d = await startResearchDaemon({ overrides: { tcpAuthThrottle: { maxFailures: 3, windowMs: WINDOW_MS } } });
    key = await createKey(d.daemon.researchDbFile, 'ws_1');
  });
  afterAll(async () => {
    await d?.close();
  });

  it('successes are not counted; K failures lock the address out (valid key too) with 429 + Retry-After; after the window the valid key works', async () => {
    for (let i = 0; i < 10; i++) expect((await api(d.base, 'GET', '/api/v1/research/research_x', { key })).status).toBe(404);
    const forged = `${key.slice(0, -4)}AAAA`;
    for (let i = 0; i < 3; i++) {
      const r = await api(d.base, 'GET', '/api/v1/research/research_x', { key: forged });
      expect(r.status).toBe(401);
    }
    for (const k of [forged, key]) {
      const res = await fetch(`${d.base}/api/v1/research/research_x`, { headers: { authorization: `Bearer ${k}` } });
      expect(res.status).toBe(429);
      const retryAfter = Number(res.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(WINDOW_MS / 1000);
      const body = (await res.json()) as any;
      expect(body.error.code).toBe('rate_limited');
      expect(body.error.details).toMatchObject({ scope: 'auth', limit: 3, retryAfterSeconds: retryAfter });
    }
    // Health is not behind a key and stays open.
    expect((await fetch(`${d.base}/v1/health`)).status).toBe(200);
    // The socket is not limited: the same bad key there is a plain 401.
    const socketClient = new FusionClient({ socketPath: d.daemon.socketPath });
    try {
      expect((await socketClient.raw('GET', '/api/v1/research/research_x', undefined, 10_000, { authorization: `Bearer ${forged}` })).status).toBe(401);
    } finally {
      await socketClient.close();
    }
    // The window running out is the subject: the same key is admitted once it has passed.
    await new Promise((r) => setTimeout(r, WINDOW_MS + 100));
    expect((await api(d.base, 'GET', '/api/v1/research/research_x', { key })).status).toBe(404);
  });
});
