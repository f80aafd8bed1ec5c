/**
 * The research run stores (SQLite file and in-memory) through the service and the executor:
 * one run per key under concurrency, claim rules, cancel in every state, and the cancel vs.
 * completion race ending in exactly one terminal state. Keys: only the digest is stored, and
 * authentication answers 401/403 as the API documents.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { FusionError } from '../../../src/errors.js';
import { createMemoryResearchStore } from '../../../src/store/research-memory-store.js';
import type { ResearchRunStore } from '../../../src/store/research-port.js';
import { RunExecutor } from '../../../src/research/run-executor.js';
import { ResearchService } from '../../../src/research/research-service.js';
import type { ResearchDispatcher } from '../../../src/research/dispatch.js';
import { authenticate, issueKey } from '../../../src/research/api-keys.js';
import { normalisePayload } from '../../../src/contracts/research.js';
import type { Crawler, CrawlOutcome } from '../../../src/research/crawl/port.js';
import { buildTestDocument } from '../../fixtures/research-test-crawler.mjs';
import { useStoreAdapters } from '../store/helpers.js';
import { waitFor } from '../../helpers/wait.js';

// The SQL stores of every engine (SQLite file; PostgreSQL on a throwaway server) and memory.
const adapters = useStoreAdapters();

const payload = normalisePayload({ query: 'q', sourceUrls: ['https://example.test/a'] });
const principal = { keyId: 'key_test', workspaceId: 'ws_1' };
const outcome = (): CrawlOutcome => ({
  snapshots: [{ url: 'https://example.test/a', canonicalUrl: 'https://example.test/a', finalUrl: 'https://example.test/a', httpStatus: 200, contentType: 'text/plain', bytes: 1, sha256: 'a'.repeat(64), content: 'x', fetchedAt: new Date().toISOString() }],
  skipped: [],
  robots: [],
  userAgent: 'UA',
});

/** A crawler the test finishes by hand: `release()` resolves every pending crawl. */
function manualCrawler(): Crawler & { started: string[]; release(): void; aborted: string[] } {
  const pending: Array<() => void> = [];
  const started: string[] = [];
  const aborted: string[] = [];
  return {
    userAgent: 'UA',
    started,
    aborted,
    release: () => pending.splice(0).forEach((f) => f()),
    crawl(request, signal) {
      started.push(request.runId);
      return new Promise((resolve, reject) => {
        pending.push(() => resolve(outcome()));
        signal.addEventListener('abort', () => {
          aborted.push(request.runId);
          reject(new FusionError('cancelled', 'aborted'));
        }, { once: true });
      });
    },
  };
}

/** A dispatcher that only records: the test drives the executor itself. */
function recordingDispatcher(executor: RunExecutor): ResearchDispatcher & { dispatched: string[] } {
  const dispatched: string[] = [];
  return {
    mode: 'queue',
    create: (_workspaceId, create) => create(),
    dispatched,
    async dispatch(run) {
      dispatched.push(run.id);
      return { dispatch: { dispatched: true, mode: 'queue', queued: true, queue: 'test', jobId: run.id } };
    },
    async cancel(runId) {
      executor.abort(runId);
    },
    activeRuns: () => executor.activeRuns,
    async close() {},
  };
}

const stores: Array<[string, () => Promise<ResearchRunStore>]> = [
  ...adapters.map((a): [string, () => Promise<ResearchRunStore>] => [a.engine, async () => (await a.newDatabase()).openResearch()]),
  ['memory', async () => createMemoryResearchStore()],
];

describe.each(stores)('research runs on the %s store', (_name, open) => {
  let store: ResearchRunStore;
  afterEach(async () => {
    await store?.close();
  });

  async function setup(): Promise<{ service: ResearchService; executor: RunExecutor; crawler: ReturnType<typeof manualCrawler>; dispatcher: ReturnType<typeof recordingDispatcher> }> {
    store = await open();
    const crawler = manualCrawler();
    const executor = new RunExecutor({ store, crawler, buildDocument: buildTestDocument, log: silentLogger(), cancelPollMs: 20 });
    const dispatcher = recordingDispatcher(executor);
    return { service: new ResearchService(store, dispatcher, silentLogger()), executor, crawler, dispatcher };
  }

  it('creates one run and dispatches once under 50 concurrent duplicate creates', async () => {
    const { service, dispatcher } = await setup();
    const outcomes = await Promise.all(Array.from({ length: 50 }, () => service.create(principal, 'dup', payload)));
    expect(outcomes.filter((o) => !o.deduplicated)).toHaveLength(1);
    expect(dispatcher.dispatched).toEqual([outcomes[0]!.run.id]);
  });

  it('cancel of a queued run: canceled, never claimed afterwards', async () => {
    const { service, executor, crawler } = await setup();
    const { run } = await service.create(principal, 'queued', payload);
    expect(run.status).toBe('queued');
    const canceled = await service.cancel(principal, run.id);
    expect(canceled.status).toBe('canceled');
    expect(canceled.cancelRequestedAt).not.toBeNull();
    expect(await executor.execute(run.id, { reclaim: true, finalAttempt: true })).toBeNull();
    expect(crawler.started).toEqual([]);
  });

  it('cancel of a running run aborts its crawl and keeps it canceled', async () => {
    const { service, executor, crawler } = await setup();
    const { run } = await service.create(principal, 'running', payload);
    const exec = executor.execute(run.id, { reclaim: false, finalAttempt: true });
    await waitFor('the crawl to start', () => crawler.started.length > 0, 10_000, 5);
    expect((await service.get(principal, run.id)).status).toBe('running');
    expect((await service.cancel(principal, run.id)).status).toBe('canceled');
    expect((await exec)?.status).toBe('canceled');
    expect(crawler.aborted).toEqual([run.id]);
    await expect(service.document(principal, run.id)).rejects.toMatchObject({ code: 'not_found' });
  });

  it('a cancel made through another service on the same store is noticed by polling', async () => {
    const { service, executor, crawler } = await setup();
    const other = new ResearchService(store, recordingDispatcher(executor), silentLogger());
    const { run } = await service.create(principal, 'elsewhere', payload);
    const exec = executor.execute(run.id, { reclaim: false, finalAttempt: true });
    await waitFor('the crawl to start', () => crawler.started.length > 0, 10_000, 5);
    // Straight to the store: no in-process abort, only the status changes.
    await store.cancelRun(run.id);
    expect((await exec)?.status).toBe('canceled');
    expect(crawler.aborted).toEqual([run.id]);
    expect((await other.get(principal, run.id)).status).toBe('canceled');
  });

  it('cancel vs. completion race: exactly one terminal state, consistent with the document', async () => {
    const { service, executor, crawler } = await setup();
    const seen = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const { run } = await service.create(principal, `race-${i}`, payload);
      const exec = executor.execute(run.id, { reclaim: false, finalAttempt: true });
      await waitFor(`the crawl of ${run.id} to start`, () => crawler.started.includes(run.id), 10_000, 1);
      // Cancel first, completion first, or both in the same tick.
      let cancelResult;
      if (i % 3 === 0) {
        cancelResult = await service.cancel(principal, run.id);
        crawler.release();
      } else if (i % 3 === 1) {
        crawler.release();
        await waitFor(`${run.id} to complete before its cancel`, async () => (await service.get(principal, run.id)).status === 'succeeded', 10_000, 1);
        cancelResult = await service.cancel(principal, run.id);
      } else {
        [cancelResult] = await Promise.all([service.cancel(principal, run.id), Promise.resolve().then(() => crawler.release())]);
      }
      const ended = await exec;
      const final = await service.get(principal, run.id);
      expect(['succeeded', 'canceled']).toContain(final.status);
      expect(ended?.status).toBe(final.status);
      // The cancel reply is the state it left, and that state is the final one.
      expect(cancelResult.status).toBe(final.status);
      const doc = await service.document(principal, run.id).then(() => true, () => false);
      expect(doc).toBe(final.status === 'succeeded');
      seen.add(final.status);
    }
    expect([...seen].sort()).toEqual(['canceled', 'succeeded']);
  });

  it('claims from queued once; re-claims running only when allowed; never after a terminal state', async () => {
    const { service } = await setup();
    const { run } = await service.create(principal, 'claims', payload);
    expect((await store.claimRun(run.id, 'UA1', false))?.claims).toBe(1);
    expect(await store.claimRun(run.id, 'UA1', false)).toBeNull();
    const again = await store.claimRun(run.id, 'UA2', true);
    expect(again?.claims).toBe(2);
    expect(again?.userAgent).toBe('UA2');
    await store.failRun(run.id, 'running', 'boom');
    expect(await store.claimRun(run.id, 'UA', true)).toBeNull();
    expect((await service.cancel(principal, run.id)).status).toBe('failed');
  });

  it('a foreign workspace sees not_found for every read and for cancel', async () => {
    const { service } = await setup();
    const { run } = await service.create(principal, 'mine', payload);
    const stranger = { keyId: 'k', workspaceId: 'ws_2' };
    // One at a time: started together, a rejection could arrive before its expect awaits it.
    for (const call of [() => service.get(stranger, run.id), () => service.cancel(stranger, run.id), () => service.document(stranger, run.id), () => service.snapshots(stranger, run.id)]) {
      await expect(call()).rejects.toMatchObject({ code: 'not_found' });
    }
    expect((await service.get(principal, run.id)).status).toBe('queued');
  });
});

describe.each(adapters)('API keys on the $engine store', (adapter) => {
  it('store only the digest and authenticate in constant time: 401 unknown/revoked/forged, 403 personal/copilot', async () => {
    const store = await (await adapter.newDatabase()).openResearch();
    try {
      const { key, record } = await issueKey(store, 'ws_k', 'workspace');
      expect(key).toMatch(/^fsk_key_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
      expect(record.keySha256).toMatch(/^[0-9a-f]{64}$/);
      expect(JSON.stringify(await store.listKeys())).not.toContain(key.split('_').at(-1)!);
      expect(await authenticate(store, `Bearer ${key}`)).toEqual({ keyId: record.id, workspaceId: 'ws_k' });
      const code = (p: Promise<unknown>): Promise<string> => p.then(() => 'ok', (e: FusionError) => e.code);
      expect(await code(authenticate(store, undefined))).toBe('unauthorized');
      expect(await code(authenticate(store, `Basic ${key}`))).toBe('unauthorized');
      expect(await code(authenticate(store, `Bearer ${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`))).toBe('unauthorized');
      expect(await code(authenticate(store, `Bearer fsk_key_0000000000000000_${'A'.repeat(43)}`))).toBe('unauthorized');
      for (const kind of ['personal', 'copilot'] as const) {
        const other = await issueKey(store, 'ws_k', kind);
        expect(await code(authenticate(store, `Bearer ${other.key}`))).toBe('forbidden');
      }
      await store.revokeKey(record.id);
      expect(await code(authenticate(store, `Bearer ${key}`))).toBe('unauthorized');
      await expect(issueKey(store, 'bad workspace!', 'workspace')).rejects.toMatchObject({ code: 'invalid_input' });
    } finally {
      await store.close();
    }
  });
});

describe('research create on a full disk', () => {
  it('answers storage_full (507, retryable) as a task submit does, not a 500 store_error', async () => {
    const store = createMemoryResearchStore();
    // What the SQL adapters throw when the disk is full: a store_error caused by SQLITE_FULL / ENOSPC.
    for (const cause of [Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' }), Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' })]) {
      const full: ResearchRunStore = { ...store, createRun: async () => Promise.reject(new FusionError('store_error', 'insert failed', { cause })) } as ResearchRunStore;
      const service = new ResearchService(full, recordingDispatcher(new RunExecutor({ store, crawler: manualCrawler(), buildDocument: buildTestDocument, log: silentLogger() })), silentLogger());
      const err = await service.create(principal, 'full', payload).catch((e: unknown) => e as FusionError);
      expect(err).toBeInstanceOf(FusionError);
      expect(err).toMatchObject({ code: 'storage_full', httpStatus: 507, retryable: true });
      expect((err as FusionError).message).toMatch(/no research run was accepted/);
    }
    await store.close();
  });
});
