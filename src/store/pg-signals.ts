/**
 * Signals between the daemons of a cluster over PostgreSQL LISTEN/NOTIFY: "task X has new
 * committed events" (each daemon re-reads them from the store and feeds its local waiters and
 * event streams) and "cancel task X" (the daemon running it aborts its sandboxes). A
 * notification carries only the task id; the store stays the one source of truth, so a missed
 * notification delays a waiter (the next one, or the terminal event, catches it up) and never
 * changes an outcome.
 */
import type pg from 'pg';
import type { Logger } from '../log.js';
import type { ClusterSignals } from './signals-port.js';
import type { PgDb } from './pg-db.js';

const EVENTS = 'fusion_task_events';
const CANCEL = 'fusion_task_cancel';

export async function createPgSignals(db: PgDb, log: Logger): Promise<ClusterSignals> {
  let listener: pg.PoolClient | undefined;
  let closed = false;
  const notify = async (channel: string, taskId: string): Promise<void> => {
    if (closed) return;
    await db.run('SELECT pg_notify(?, ?)', [channel, taskId]);
  };
  return {
    eventsCommitted(taskId) {
      notify(EVENTS, taskId).catch((err: unknown) => log.warn({ taskId, err }, 'could not notify the cluster of new task events'));
    },
    cancel: (taskId) => notify(CANCEL, taskId),
    async subscribe(handlers) {
      listener = await db.connectListener();
      listener.on('notification', (msg) => {
        if (msg.payload === undefined) return;
        if (msg.channel === EVENTS) handlers.events(msg.payload);
        else if (msg.channel === CANCEL) handlers.cancel(msg.payload);
      });
      listener.on('error', (err) => log.error({ err }, 'cluster signal connection failed; cross-daemon events now arrive only through the store'));
      await listener.query(`LISTEN ${EVENTS}`);
      await listener.query(`LISTEN ${CANCEL}`);
    },
    async close() {
      closed = true;
      if (listener !== undefined) {
        await listener.query(`UNLISTEN *`).catch(() => undefined);
        listener.release();
      }
    },
  };
}
