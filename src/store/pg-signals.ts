/**
 * Signals between the daemons of a cluster over PostgreSQL LISTEN/NOTIFY: "task X has new
 * committed events" (each daemon re-reads them from the store and feeds its local waiters and
 * event streams) and "cancel task X" (the daemon running it aborts its sandboxes). A
 * notification carries only the task id; the store stays the one source of truth, so a missed
 * notification delays a waiter (the next one, or the terminal event, catches it up) and never
 * changes an outcome. The LISTEN session comes back by itself after the database restarts
 * (pg-session.ts); notifications sent while it was away are missed, as above.
 */
import type { Logger } from '../log.js';
import type { ClusterSignals } from './signals-port.js';
import type { PgDb } from './pg-db.js';
import { createPgSession, type PgSession } from './pg-session.js';

const EVENTS = 'fusion_task_events';
const CANCEL = 'fusion_task_cancel';

export async function createPgSignals(db: PgDb, log: Logger): Promise<ClusterSignals> {
  let session: PgSession | undefined;
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
      session = createPgSession(db, log, {
        what: 'cluster signals',
        onConnect: async (client) => {
          client.on('notification', (msg) => {
            if (msg.payload === undefined) return;
            if (msg.channel === EVENTS) handlers.events(msg.payload);
            else if (msg.channel === CANCEL) handlers.cancel(msg.payload);
          });
          await client.query(`LISTEN ${EVENTS}`);
          await client.query(`LISTEN ${CANCEL}`);
        },
        onLost: () => log.error({}, 'cluster signal connection lost; cross-daemon events arrive through the store until it is back'),
      });
      await session.client();
    },
    async close() {
      closed = true;
      await session?.close();
    },
  };
}
