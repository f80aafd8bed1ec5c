/**
 * Direct dispatch runs inside a request: a daemon that dies mid-run leaves its run `running`
 * (or `queued`) with nobody to finish it. On start-up, with its own research database, the
 * daemon marks such runs failed; with a shared --research-db it leaves them alone (another
 * daemon may own them).
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openResearchSqliteStore } from '../../../src/store/research-sqlite-store.js';
import { silentLogger } from '../../../src/log.js';
import { RESEARCH_RESTART_MESSAGE } from '../../../src/main.js';
import { normalisePayload } from '../../../src/contracts/research.js';
import { payloadSha256 } from '../../../src/research/research-service.js';
import { api, createKey, startResearchDaemon, tempHome } from './helpers.js';

async function leaveUnfinished(file: string): Promise<{ running: string; queued: string }> {
  const store = await openResearchSqliteStore({ file, log: silentLogger() });
  const payload = normalisePayload({ query: 'q', sourceUrls: ['https://example.test/'] });
  const base = { workspaceId: 'ws_r', payloadSha256: payloadSha256(payload), ...payload };
  const running = (await store.createRun({ ...base, id: 'research_running', idempotencyKey: 'k1' }, 'FluxusResearchBot')).run.id;
  const queued = (await store.createRun({ ...base, id: 'research_queued', idempotencyKey: 'k2' })).run.id;
  await store.close();
  return { running, queued };
}

describe('research runs left unfinished by a dead daemon', () => {
  it('are marked failed at start-up in direct mode with the daemon\'s own database', async () => {
    const home = tempHome();
    const ids = await leaveUnfinished(join(home, 'fusion.db'));
    const key = await createKey(join(home, 'fusion.db'), 'ws_r');
    const d = await startResearchDaemon({ home });
    try {
      for (const id of [ids.running, ids.queued]) {
        const run = (await api(d.base, 'GET', `/api/v1/research/${id}`, { key })).body.run;
        expect(run.status).toBe('failed');
        expect(run.error).toBe(RESEARCH_RESTART_MESSAGE);
      }
    } finally {
      await d.close();
    }
  });

  it('are left alone with a shared --research-db', async () => {
    const shared = join(tempHome(), 'research.db');
    const ids = await leaveUnfinished(shared);
    const key = await createKey(shared, 'ws_r');
    const d = await startResearchDaemon({ config: { researchDb: shared } });
    try {
      expect((await api(d.base, 'GET', `/api/v1/research/${ids.running}`, { key })).body.run.status).toBe('running');
    } finally {
      await d.close();
    }
  });
});
