/**
 * Shared by the cluster e2e tests: a cluster daemon as its own process
 * (test/fixtures/e2e/cluster-daemon.mjs: the real workflow, bwrap, builtin engine), its READY
 * line, its stdout lines, and a cleanup that stops it and removes its home and run root.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
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
  proc: ChildProcess;
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
  const home = mkdtempSync(join(tmpdir(), `fusion-cluster-${id}-`));
  const runRoot = freshRunRoot();
  const proc = spawn(process.execPath, [join(ROOT, 'test', 'fixtures', 'e2e', 'cluster-daemon.mjs'), home, runRoot, id, databaseUrl, redisUrl, String(delayMs)], {
    stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env },
  });
  let out = '';
  let err = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  cleanups.push(async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    }
    rmSync(home, { recursive: true, force: true });
    rmSync(runRoot, { recursive: true, force: true });
  });
  const socket = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`cluster daemon ${id} did not start: ${err}`)), 60_000);
    proc.stdout!.on('data', () => {
      const m = /^READY (\S+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`cluster daemon ${id} exited before READY: ${err}`));
    });
  });
  return { proc, socket, home, lines: () => out.split('\n').filter(Boolean), log: () => err, exited };
}
