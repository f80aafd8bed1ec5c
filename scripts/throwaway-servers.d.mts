import type { ChildProcess } from 'node:child_process';

export const PG_ROOT: string;
export const REDIS_SERVER: string;
export function pgBinDir(): string | undefined;
export function freePort(host?: string): Promise<number>;

export interface PostgresServer {
  port: number;
  /** URL of the `postgres` maintenance database. */
  adminUrl: string;
  /** A new, empty database; its URL. */
  createDatabase(): Promise<string>;
  /** Fast shutdown, then the data directory is removed. */
  stop(): Promise<void>;
  /** Fast shutdown keeping the data (a database outage); `resume` starts it again on the same port. */
  halt(): Promise<void>;
  resume(): Promise<void>;
}
export function startPostgres(): Promise<PostgresServer>;

export interface RedisProc {
  url: string;
  port: number;
  proc: ChildProcess;
  stop(): Promise<void>;
  /** SIGKILL (no persistence: the data is gone); `resume` starts an empty server on the same port. */
  kill(): Promise<void>;
  resume(): Promise<void>;
}
export function startRedis(): Promise<RedisProc>;
