/**
 * The run states of docs/behaviour.md#g6 over the HTTP API in direct mode (no REDIS_URL): a run
 * waiting behind its workspace's cap of DIRECT_RUNS_PER_WORKSPACE reads `queued` (no startedAt)
 * until it starts; cancelling it ends it `canceled` at once and its create request answers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpOrigin, type Listener } from '../egress/origin.js';
import { DIRECT_RUNS_PER_WORKSPACE } from '../../../src/research/dispatch.js';
import { researchRunId } from '../../../src/research/run-id.js';
import { api, createKey, ORIGIN_HOST, pollRun, startResearchDaemon, type ResearchDaemon } from './helpers.js';

let origin: Listener;
let d: ResearchDaemon;
let key: string;

beforeAll(async () => {
  origin = await startHttpOrigin((_req, res) => void res.writeHead(200, { 'content-type': 'text/html' }).end('<p>page</p>'));
  // Every crawl waits a minute (until canceled): the first runs hold the workspace's slots.
  d = await startResearchDaemon({ crawlDelayMs: 60_000 });
  key = await createKey(d.daemon.researchDbFile, 'ws_states');
});

afterAll(async () => {
  await d?.close();
  await origin?.close();
});

describe('direct mode states', () => {
  it('a run waiting behind the cap is queued until claimed; its cancel ends it canceled and never crawls it', async () => {
    const sourceUrls = [`http://${ORIGIN_HOST}:${String(origin.port)}/`];
    const holders = Array.from({ length: DIRECT_RUNS_PER_WORKSPACE }, (_, i) => `hold-${String(i)}`);
    const held = holders.map((idem) => api(d.base, 'POST', '/api/v1/research', { key, idem, body: { query: idem, sourceUrls } }));
    for (const idem of holders) await pollRun(d.base, key, researchRunId('ws_states', idem), (r) => r.status === 'running');

    const waitingCreate = api(d.base, 'POST', '/api/v1/research', { key, idem: 'waiting', body: { query: 'waiting', sourceUrls } });
    const id = researchRunId('ws_states', 'waiting');
    const queued = await pollRun(d.base, key, id, (r) => r.status !== undefined);
    expect(queued).toMatchObject({ status: 'queued', startedAt: null, userAgent: null });
    // Still queued a moment later: nothing claims it while the slots are held.
    expect((await api(d.base, 'GET', `/api/v1/research/${id}`, { key })).body.run.status).toBe('queued');

    const cancel = await api(d.base, 'POST', `/api/v1/research/${id}/cancel`, { key, idem: 'cancel-waiting' });
    expect(cancel.status).toBe(200);
    expect(cancel.body.run).toMatchObject({ status: 'canceled', startedAt: null });
    const reply = await waitingCreate;
    expect(reply.status).toBe(202);
    expect(reply.body.run.status).toBe('canceled');
    expect(d.crawler.calls).not.toContain(id);

    for (const idem of holders) await api(d.base, 'POST', `/api/v1/research/${researchRunId('ws_states', idem)}/cancel`, { key, idem: `c-${idem}` });
    await Promise.all(held);
  });
});
