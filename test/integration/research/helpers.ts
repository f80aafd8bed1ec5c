/**
 * Shared set-up for the research-service tests: a real redis-server per suite (random loopback
 * port, no persistence: scripts/throwaway-servers.mjs), an in-process daemon with a TCP listener and the test crawler (real
 * egress guard, origins on 127.0.0.2), API keys written with the real key code, and HTTP calls
 * over loopback TCP or the daemon's Unix socket.
 */
import { tempPath } from '../../helpers/temp-dir.js';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { buildConfig, startDaemon, type Daemon, type DaemonOverrides } from '../../../src/main.js';
import { silentLogger } from '../../../src/log.js';
import { issueKey } from '../../../src/research/api-keys.js';
import { openResearchSqliteStore } from '../../../src/store/research-sqlite-store.js';
import type { ApiKeyKind } from '../../../src/contracts/research.js';
import type { DaemonConfigInput } from '../../../src/contracts/config.js';
import { buildTestDocument, createTestCrawler, type TestCrawler } from '../../fixtures/research-test-crawler.mjs';
import { REDIS_SERVER } from '../../../scripts/throwaway-servers.mjs';
import { waitFor } from '../../helpers/wait.js';

export { REDIS_SERVER, freePort, startRedis, type RedisProc } from '../../../scripts/throwaway-servers.mjs';
export const ORIGIN_HOST = 'origin.test';

/**
 * True when a real redis-server can be started. With CI=true a missing server is an error
 * (the suites must not silently skip); locally the suites skip LOUDLY with the reason.
 */
export function redisAvailable(): boolean {
  if (existsSync(REDIS_SERVER)) return true;
  const why = `${REDIS_SERVER} is missing (Debian package redis-server; make setup installs it)`;
  if (process.env.CI === 'true') throw new Error(`research queue tests need redis-server: ${why}`);
  process.stderr.write(`\n!!! SKIPPING the BullMQ variants of the research tests: ${why}\n\n`);
  return false;
}

/** A fresh data directory (test/helpers/temp-dir.ts); the caller removes it. */
export function tempHome(prefix = 'fusion-research-'): string {
  return tempPath(prefix);
}

export interface ResearchDaemon {
  daemon: Daemon;
  /** The test crawler (undefined with realCrawler). */
  crawler: TestCrawler;
  base: string;
  home: string;
  close(): Promise<void>;
}

export async function startResearchDaemon(options: {
  home?: string;
  redisUrl?: string;
  crawlDelayMs?: number;
  /** Use the real crawl engine (src/research/crawl) instead of the test crawler. */
  realCrawler?: boolean;
  config?: Partial<DaemonConfigInput>;
  overrides?: DaemonOverrides;
} = {}): Promise<ResearchDaemon> {
  const home = options.home ?? tempHome();
  const config = buildConfig({
    home,
    socketPath: join(home, 'fusion.sock'),
    logLevel: 'silent',
    listen: '127.0.0.1:0',
    egressResolve: [`${ORIGIN_HOST}:127.0.0.2`],
    egressAllowCidrs: ['127.0.0.2/32'],
    // Each test daemon has its own research database on the file's one Redis: the cluster prefix
    // keeps them apart (the default bull prefix admits one database; a test asks for it).
    ...(options.redisUrl ? { redisUrl: options.redisUrl, researchQueuePrefix: 'cluster' } : {}),
    ...options.config,
  });
  let crawler: TestCrawler | undefined;
  const daemon = await startDaemon(config, {
    log: silentLogger(),
    runner: { run: () => Promise.reject(new Error('no task runs in the research tests')) },
    ...(options.realCrawler
      ? {}
      : {
          researchCrawler: (o) => (crawler = createTestCrawler({ fetch: o.fetch, ...(o.userAgent ? { userAgent: o.userAgent } : {}), delayMs: options.crawlDelayMs ?? 0 })),
          researchDocument: buildTestDocument,
        }),
    researchCancelPollMs: 50,
    ...options.overrides,
  });
  return { daemon, crawler: crawler!, base: `http://127.0.0.1:${daemon.tcp!.port}`, home, close: () => daemon.close() };
}

export async function createKey(file: string, workspaceId: string, kind: ApiKeyKind = 'workspace'): Promise<string> {
  const store = await openResearchSqliteStore({ file, log: silentLogger() });
  try {
    return (await issueKey(store, workspaceId, kind)).key;
  } finally {
    await store.close();
  }
}

export interface Reply {
  status: number;
  body: any;
}

export async function api(base: string, method: string, path: string, opts: { key?: string; idem?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key !== undefined) headers.authorization = `Bearer ${opts.key}`;
  if (opts.idem !== undefined) headers['idempotency-key'] = opts.idem;
  const withBody = opts.body !== undefined && method !== 'GET' && method !== 'HEAD';
  if (withBody) headers['content-type'] = 'application/json';
  const res = await fetch(`${base}${path}`, { method, headers, ...(withBody ? { body: JSON.stringify(opts.body) } : {}) });
  const text = await res.text();
  return { status: res.status, body: text === '' ? null : (JSON.parse(text) as unknown) };
}

/** Polls GET /api/v1/research/:id until `done(run)` or the timeout. */
export async function pollRun(base: string, key: string, id: string, done: (run: any) => boolean, timeoutMs = 20_000): Promise<any> {
  let last: unknown;
  try {
    return await waitFor(`run ${id} to reach the expected state`, async () => {
      const r = await api(base, 'GET', `/api/v1/research/${id}`, { key });
      last = r.body;
      return r.status === 200 && done(r.body.run) ? (r.body.run as unknown) : false;
    }, timeoutMs, 50);
  } catch (err) {
    throw new Error(`${(err as Error).message}; last: ${JSON.stringify(last)}`, { cause: err });
  }
}

export const TERMINAL = (run: { status: string }): boolean => ['succeeded', 'failed', 'canceled'].includes(run.status);
