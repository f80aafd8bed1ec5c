/**
 * Cluster mode (docs/operations.md#cluster-mode): the task service's side of the shared queue
 * and of the signals between daemons. Tasks go to the queue instead of this daemon's
 * dispatcher, any daemon of the cluster may run them, and new events and cancels travel
 * between the daemons.
 */
import type { Logger } from '../log.js';
import { FusionError } from '../errors.js';
import { isTerminal } from '../contracts/task-state.js';
import type { Store, TaskRecord } from '../store/port.js';
import type { ClusterSignals, QueuedRun, TaskQueue } from './cluster-port.js';
import { hasRun } from './task-run.js';

export interface Cluster {
  queue: TaskQueue;
  signals: ClusterSignals;
  /** Names this daemon in the events of the runs it takes. */
  daemonId: string;
}

/** What the bridge needs of the task service. */
export interface ClusterBridgeHost {
  store: Store;
  log: Logger;
  maxResumes: number;
  accepting(): boolean;
  fail(taskId: string, err: FusionError): Promise<void>;
  publish(taskId: string): Promise<void>;
  publishRemote(taskId: string): Promise<void>;
  /** Runs a task under `ac` until its run settled (tracked as this daemon's run meanwhile). */
  run(task: TaskRecord, ac: AbortController, how: { resume: boolean }): Promise<void>;
  /** Aborts this daemon's run of `taskId` as a cancel, if it has one. */
  abortLocal(taskId: string): void;
}

export class ClusterBridge {
  constructor(readonly cluster: Cluster, private readonly host: ClusterBridgeHost) {}

  /** Queues a new task's job; a task whose job could not be queued fails at once. */
  async enqueueOrFail(task: TaskRecord): Promise<void> {
    try {
      await this.cluster.queue.enqueue(task);
    } catch (err) {
      const fe = new FusionError('dispatch_failed', `the task could not be handed to the cluster queue: ${(err as Error).message}`, { cause: err });
      await this.host.fail(task.id, fe);
      throw fe;
    }
  }

  /**
   * Runs a task this daemon's worker took from the shared queue, and resolves when the run
   * settled. A task found past `queued` was running on a daemon that died or drained: it is
   * resumed from its last committed stage boundary under the restart-recovery rules (one
   * resume, then supervisor_restarted), exactly as a restarted daemon would.
   */
  async runQueued(job: QueuedRun): Promise<void> {
    const { store, log } = this.host;
    const task = await store.getTask(job.taskId);
    if (task === null || isTerminal(task.state) || !this.host.accepting()) return;
    let resume = false;
    if (hasRun(task.state)) {
      if (task.resumeCount >= this.host.maxResumes) {
        await this.host.fail(task.id, new FusionError('supervisor_restarted', `the daemon running the task stopped while it was ${task.state}; it had already been resumed ${task.resumeCount} time(s), so it was not resumed again. Submit it again.`, { stage: task.state }));
        return;
      }
      await store.incrementResumeCount(task.id);
      await store.appendEvent(task.id, 'progress', { recovery: 'resumed', state: task.state, daemon: this.cluster.daemonId });
      log.warn({ taskId: task.id, state: task.state }, 'resuming a task whose daemon stopped');
      resume = true;
    } else {
      await store.appendEvent(task.id, 'progress', { daemon: this.cluster.daemonId });
    }
    await this.host.publish(task.id);
    const ac = new AbortController();
    const drain = (): void => ac.abort('shutdown');
    job.signal.addEventListener('abort', drain, { once: true });
    try {
      await this.host.run(resume ? { ...task, resumeCount: task.resumeCount + 1 } : task, ac, { resume });
    } finally {
      job.signal.removeEventListener('abort', drain);
    }
  }

  /**
   * At start-up: every unfinished task gets its queue job again (a no-op for the tasks whose job
   * exists), so a task whose submitting daemon died before queueing it still runs.
   */
  async requeueUnfinished(): Promise<number> {
    const unfinished = await this.host.store.listNonTerminalTasks();
    for (const task of unfinished) await this.cluster.queue.enqueue(task);
    return unfinished.length;
  }

  /** Another daemon committed events of `taskId`: feed them to the local waiters. */
  remoteEvents(taskId: string): void {
    void this.host.publishRemote(taskId).catch(() => undefined);
  }

  /** Another daemon cancelled `taskId`: stop the local run, if this daemon has it. */
  remoteCancel(taskId: string): void {
    this.host.abortLocal(taskId);
  }

  /** A task cancelled here that runs (or waits) elsewhere: tell its daemon, drop a job not started yet. */
  async cancelElsewhere(taskId: string): Promise<void> {
    await this.cluster.signals.cancel(taskId).catch((err: unknown) => this.host.log.warn({ taskId, err }, 'could not signal the cancel to the cluster'));
    await this.cluster.queue.removeWaiting(taskId);
  }
}
