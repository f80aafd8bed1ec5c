/**
 * One dedicated PostgreSQL session that comes back by itself (cluster mode): LISTEN and
 * session-level advisory locks live on one connection, so a server restart or a dropped
 * connection ends them. This holds the session, reconnects with a capped backoff while the
 * database is away, and runs `onConnect` on every new session (re-LISTEN, re-take the leases)
 * before it is handed out again.
 */
import type pg from 'pg';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import type { PgDb } from './pg-db.js';

export interface PgSession {
  /** The live session, connecting (once) when there is none; throws store_error when the database is unreachable. */
  client(): Promise<pg.PoolClient>;
  /** True while a session is connected. */
  readonly connected: boolean;
  close(): Promise<void>;
}

export interface PgSessionOptions {
  what: string;
  onConnect: (client: pg.PoolClient) => Promise<void>;
  /** Called when the session is lost (before reconnecting starts). */
  onLost?: () => void;
  /** First and largest pause between reconnect attempts. */
  retryMs?: number;
  maxRetryMs?: number;
}

export function createPgSession(db: PgDb, log: Logger, options: PgSessionOptions): PgSession {
  let current: pg.PoolClient | undefined;
  let connecting: Promise<pg.PoolClient> | undefined;
  let closed = false;
  let retryTimer: NodeJS.Timeout | undefined;
  let delay = options.retryMs ?? 1000;
  const maxDelay = options.maxRetryMs ?? 10_000;

  const lost = (client: pg.PoolClient, err: unknown): void => {
    if (current !== client) return;
    current = undefined;
    // The broken connection is destroyed, not returned to the pool.
    try {
      client.release(err instanceof Error ? err : new Error(String(err)));
    } catch {
      // already released
    }
    if (closed) return;
    log.warn({ what: options.what, err }, 'postgres session lost; reconnecting');
    options.onLost?.();
    scheduleRetry();
  };

  const scheduleRetry = (): void => {
    if (closed || retryTimer !== undefined) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      connect().catch(() => undefined);
    }, delay);
    retryTimer.unref();
    delay = Math.min(maxDelay, delay * 2);
  };

  const connect = (): Promise<pg.PoolClient> => {
    if (current !== undefined) return Promise.resolve(current);
    if (closed) return Promise.reject(new FusionError('store_error', `the ${options.what} session is closed`));
    connecting ??= (async () => {
      const client = await db.connectListener();
      client.on('error', (err) => lost(client, err));
      client.on('end', () => lost(client, new Error('connection ended')));
      current = client;
      try {
        await options.onConnect(client);
      } catch (err) {
        lost(client, err);
        throw err;
      }
      delay = options.retryMs ?? 1000;
      return client;
    })().finally(() => {
      connecting = undefined;
    });
    const attempt = connecting;
    attempt.catch((err: unknown) => {
      if (closed) return;
      log.debug({ what: options.what, err }, 'postgres session not connected yet');
      scheduleRetry();
    });
    return attempt;
  };

  return {
    client: connect,
    get connected() {
      return current !== undefined;
    },
    async close() {
      closed = true;
      clearTimeout(retryTimer);
      const client = current;
      current = undefined;
      // Destroyed, not pooled: its session's locks and LISTENs end with it.
      client?.release(true);
    },
  };
}
