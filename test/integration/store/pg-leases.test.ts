/**
 * Run leases over PostgreSQL advisory locks (src/store/pg-leases.ts), two "daemons" (two PgDb
 * connections) on one throwaway server: one holder at a time, visible to the other, gone with
 * the holder's session, taken back after a server restart, and a lease another daemon took
 * meanwhile reported lost.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/wait.js';
import { silentLogger } from '../../../src/log.js';
import { PgDb } from '../../../src/store/pg-db.js';
import { createPgLeases } from '../../../src/store/pg-leases.js';
import type { RunLeases } from '../../../src/store/signals-port.js';
import { postgresAvailable, startPostgres, type PostgresServer } from '../../setup/postgres-server.js';

const withPg = postgresAvailable();

const until = async (what: string, probe: () => Promise<boolean>, ms = 20_000): Promise<void> => {
  await waitFor(what, probe, ms, 100);
};

describe.runIf(withPg)('PostgreSQL run leases', () => {
  let server: PostgresServer;
  let url: string;
  const dbs: PgDb[] = [];
  const leases: RunLeases[] = [];
  const daemon = async (): Promise<RunLeases> => {
    const db = await PgDb.open(url, silentLogger(), { maxConnections: 3 });
    dbs.push(db);
    const l = createPgLeases(db, silentLogger());
    leases.push(l);
    return l;
  };
  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase();
  });
  afterAll(async () => {
    for (const l of leases) await l.close();
    for (const db of dbs) await db.close();
    await server?.stop();
  });

  it('one holder at a time, seen by every daemon, released by release() and by a closed session', async () => {
    const a = await daemon();
    const b = await daemon();
    expect(await a.acquire('task-1')).toBe(true);
    expect(await a.acquire('task-1')).toBe(false);
    expect(await b.acquire('task-1')).toBe(false);
    expect(await b.held(['task-1', 'task-2'])).toEqual(new Set(['task-1']));
    await a.release('task-1');
    expect(await b.held(['task-1'])).toEqual(new Set());
    expect(await b.acquire('task-1')).toBe(true);
    // A daemon that goes away (its session ends) leaves nothing held.
    await b.close();
    await until('the closed session\'s lease to end', async () => (await a.held(['task-1'])).size === 0);
    expect(await a.acquire('task-1')).toBe(true);
    await a.release('task-1');
  });

  it('after a server restart a daemon takes its leases back; one another daemon took meanwhile is reported lost', async () => {
    const a = await daemon();
    const lost: string[] = [];
    a.onLost((id) => lost.push(id));
    expect(await a.acquire('kept')).toBe(true);
    expect(await a.acquire('taken')).toBe(true);
    await server.halt();
    await server.resume();
    // Another daemon, first after the restart, takes one of them before `a` reconnects.
    const b = await daemon();
    expect(await b.acquire('taken')).toBe(true);
    await until('daemon a to take its leases back', async () => (await b.held(['kept'])).size === 1);
    await until('the taken lease to be reported lost', async () => lost.includes('taken'));
    expect(lost).toEqual(['taken']);
    expect(await b.acquire('kept')).toBe(false);
  });
});
