/**
 * Signals between the daemons sharing one database (cluster mode): a task has new committed
 * events; a task was cancelled. Implemented over PostgreSQL LISTEN/NOTIFY (pg-signals.ts); the
 * task layer sees only this port.
 */
export interface ClusterSignals {
  /** Tells every daemon that `taskId` has new committed events (they re-read the store). */
  eventsCommitted(taskId: string): void;
  /** Tells every daemon to abort its local run of `taskId` (the store already says cancelled). */
  cancel(taskId: string): Promise<void>;
  subscribe(handlers: { events(taskId: string): void; cancel(taskId: string): void }): Promise<void>;
  close(): Promise<void>;
}
