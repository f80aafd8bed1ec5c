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

/**
 * Run leases of a cluster that outlive the queue (docs/operations.md#cluster-mode): a daemon
 * holds a task's lease while it runs the task, and loses it when it dies (its database session
 * ends). Redis can lose a job and its lock; this lease is what tells the queue reconciler that
 * a task without a job is still being run somewhere.
 */
export interface RunLeases {
  /** Takes the lease of `id` for this daemon: false when a live daemon (this one too) holds it, throws when the database is unreachable. */
  acquire(id: string): Promise<boolean>;
  release(id: string): Promise<void>;
  /** Which of `ids` some live daemon of the cluster holds (this one included). */
  held(ids: readonly string[]): Promise<Set<string>>;
  /**
   * Called with a lease this daemon held and could not take back after its database session
   * was lost (another daemon has it now): the local run must stop.
   */
  onLost(handler: (id: string) => void): void;
  close(): Promise<void>;
}
