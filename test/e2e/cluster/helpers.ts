/**
 * Shared by the cluster e2e tests: a cluster daemon as its own process
 * (test/fixtures/e2e/cluster-daemon.mjs: the real workflow, bwrap, builtin engine), its READY
 * line, its stdout lines, and a cleanup that stops it and removes its home and run root.
 */
import { startFixtureDaemon, type FixtureDaemon, type Started } from '../../helpers/cli.js';
import { tempPath } from '../../helpers/temp-dir.js';
import { afterAll, beforeAll } from 'vitest';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, freshRunRoot } from '../workflow/helpers.js';
import { postgresAvailable, startPostgres, type PostgresServer } from '../../setup/postgres-server.js';
import { redisAvailable, startRedis, type RedisProc } from '../../integration/research/helpers.js';

/** The throwaway PostgreSQL and Redis of one cluster test file, and what to clean up after it. */
export interface ClusterEngines {
  /** False only outside CI when a server is missing (said loudly); under CI=true a missing one throws. */
  ready: boolean;
  cleanups: Array<() => Promise<void> | void>;
  pg(): PostgresServer;
  redisUrl(): string;
  redis(): RedisProc;
}

/** Registers the file's beforeAll/afterAll: servers up first; cleanups (newest first), then the servers, last. */
export function useClusterEngines(): ClusterEngines {
  const cleanups: Array<() => Promise<void> | void> = [];
  let pgServer: PostgresServer | undefined;
  let redis: RedisProc | undefined;
  const ready = postgresAvailable() && redisAvailable();
  beforeAll(async () => {
    if (!ready) return;
    pgServer = await startPostgres();
    redis = await startRedis();
  });
  afterAll(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    await redis?.stop();
    await pgServer?.stop();
  });
  return {
    ready,
    cleanups,
    pg: () => pgServer ?? (() => { throw new Error('PostgreSQL is not started'); })(),
    redisUrl: () => redis?.url ?? (() => { throw new Error('Redis is not started'); })(),
    redis: () => redis ?? (() => { throw new Error('Redis is not started'); })(),
  };
}

export interface ClusterDaemon {
  proc: Started['proc'];
  socket: string;
  home: string;
  lines: () => string[];
  /** Its stderr (the daemon's log) so far. */
  log: () => string;
  exited: Promise<void>;
}

/**
 * Starts a daemon of the cluster on `databaseUrl` + `redisUrl`; its first candidate of each task
 * sleeps `delayMs`; `env` adds to its environment (test switches of the fixture). The cleanup (stop, then remove its directories) is pushed onto `cleanups`.
 */
export async function spawnClusterDaemon(
  id: string, databaseUrl: string, redisUrl: string, delayMs: number, cleanups: Array<() => Promise<void> | void>,
  env: Record<string, string> = {},
): Promise<ClusterDaemon> {
  const home = tempPath(`fusion-cluster-${id}-`);
  const runRoot = freshRunRoot();
  const removeDirs = (): void => {
    rmSync(home, { recursive: true, force: true });
    rmSync(runRoot, { recursive: true, force: true });
  };
  let d: FixtureDaemon;
  try {
    d = await startFixtureDaemon(join(ROOT, 'test', 'fixtures', 'e2e', 'cluster-daemon.mjs'), [home, runRoot, id, databaseUrl, redisUrl, String(delayMs)], { env }, 60_000);
  } catch (err) {
    removeDirs();
    throw err;
  }
  cleanups.push(async () => {
    await d.started.stop('SIGTERM', 15_000);
    removeDirs();
  });
  return { proc: d.started.proc, socket: d.socket, home, lines: d.lines, log: d.stderr, exited: d.started.exited.then(() => undefined) };
}
