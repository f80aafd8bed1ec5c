/**
 * The ports of cluster mode (docs/operations.md#cluster-mode): a shared task queue in place of
 * direct dispatch, and signals between the daemons sharing one database (new events of a task,
 * a cancel). With neither, the task service runs everything in this process as before.
 */
import type { Workflow } from '../contracts/constants.js';

/** What a queue job knows when it starts on some daemon of the cluster. */
export interface QueuedRun {
  taskId: string;
  /** Aborted when this daemon drains (SIGTERM): the run stops and the job goes back to the queue. */
  signal: AbortSignal;
}

export interface TaskQueue {
  /** Adds the task's job (job id = task id: adding it twice is a no-op, so it never runs twice). */
  enqueue(task: { id: string; workflow: Workflow }): Promise<void>;
  /** Starts this daemon's workers; `run` executes one task and resolves when its run settled. */
  start(run: (job: QueuedRun) => Promise<void>): Promise<void>;
  /** Removes the task's job if it has not started (after a cancel). */
  removeWaiting(taskId: string): Promise<void>;
  /** Graceful drain: takes no new job, aborts the active runs (their jobs are retried elsewhere), waits for them. */
  close(): Promise<void>;
  /** Jobs this daemon runs now, and jobs waiting in the queues of the cluster. */
  readonly running: number;
  queued(): Promise<number>;
}

export type { ClusterSignals, RunLeases } from '../store/signals-port.js';
