/**
 * Direct dispatch: tasks run in this process, at most `concurrency` at a time, in arrival
 * order. (BullMQ dispatch for many hosts plugs in behind the same interface.)
 */
export interface Dispatcher {
  /** Queues a job; resolves when it is accepted (not when it finishes). */
  dispatch(taskId: string, job: () => Promise<void>): void;
  /** Resolves when every started job settled (for graceful shutdown). */
  drain(): Promise<void>;
  readonly running: number;
  readonly queued: number;
}

export function createDirectDispatcher(concurrency: number): Dispatcher {
  const queue: Array<() => Promise<void>> = [];
  const active = new Set<Promise<void>>();

  const pump = (): void => {
    while (active.size < concurrency && queue.length > 0) {
      const job = queue.shift()!;
      const p = job().catch(() => undefined).finally(() => {
        active.delete(p);
        pump();
      });
      active.add(p);
    }
  };

  return {
    dispatch(_taskId, job) {
      queue.push(job);
      // Start on the next turn: the caller (a receipt) answers before any job work runs.
      setImmediate(pump);
    },
    async drain() {
      queue.length = 0;
      while (active.size > 0) await Promise.allSettled([...active]);
    },
    get running() {
      return active.size;
    },
    get queued() {
      return queue.length;
    },
  };
}
