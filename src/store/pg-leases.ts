/**
 * Run leases over PostgreSQL session-level advisory locks (cluster mode): a daemon locks
 * `(namespace, hash of the id)` on its own dedicated session while it runs a task or research
 * run; the lock ends with the session, so a dead daemon's leases end when its connection does
 * (at once for a killed process, after TCP keep-alive for a vanished host). Any daemon can ask
 * `pg_locks` which ids are leased. No table and no heartbeat: nothing to expire or clean up.
 *
 * After the session is lost (a server restart), it is opened again and every lease this daemon
 * still holds is taken again; a lease another daemon took meanwhile is reported lost, and the
 * local run stops. A 32-bit hash may collide: two ids then share a lease, which only makes one
 * wait (the reconciler skips a leased id), never run twice.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { Logger } from '../log.js';
import type { PgDb } from './pg-db.js';
import { createPgSession } from './pg-session.js';
import type { RunLeases } from './signals-port.js';

/** Any constant (the first key of every lease): "FUSL". Distinct from the migration lock's bigint key. */
const LEASE_NAMESPACE = 0x4655534c;

/** The lease key of an id: the first 32 bits of its sha256, unsigned (as `pg_locks.objid` shows it). */
export function leaseKey(id: string): number {
  return createHash('sha256').update(id).digest().readUInt32BE(0);
}

/** `pg_try_advisory_lock(int4, int4)` takes signed keys. */
const signed = (key: number): number => key | 0;

export function createPgLeases(db: PgDb, log: Logger): RunLeases {
  const mine = new Set<string>();
  const lostHandlers: Array<(id: string) => void> = [];
  const tryLock = async (client: pg.PoolClient, id: string): Promise<boolean> => {
    const res = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS ok', [LEASE_NAMESPACE, signed(leaseKey(id))]);
    return res.rows[0]?.ok === true;
  };
  const session = createPgSession(db, log, {
    what: 'run leases',
    onConnect: async (client) => {
      for (const id of [...mine]) {
        if (await tryLock(client, id)) continue;
        mine.delete(id);
        log.error({ id }, 'run lease lost while the database was away (another daemon took it): stopping the local run');
        for (const h of lostHandlers) h(id);
      }
    },
  });
  return {
    async acquire(id) {
      if (mine.has(id)) return false;
      const client = await session.client();
      if (!(await tryLock(client, id))) return false;
      mine.add(id);
      return true;
    },
    async release(id) {
      if (!mine.delete(id) || !session.connected) return;
      const client = await session.client();
      await client.query('SELECT pg_advisory_unlock($1, $2)', [LEASE_NAMESPACE, signed(leaseKey(id))]).catch((err: unknown) => log.warn({ id, err }, 'run lease release failed (it ends with the session)'));
    },
    async held(ids) {
      if (ids.length === 0) return new Set();
      const rows = await db.all<{ objid: number | string }>(
        `SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = ?
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        [LEASE_NAMESPACE],
      );
      const keys = new Set(rows.map((r) => Number(r.objid)));
      return new Set(ids.filter((id) => keys.has(leaseKey(id))));
    },
    onLost(handler) {
      lostHandlers.push(handler);
    },
    async close() {
      mine.clear();
      await session.close();
    },
  };
}
