/**
 * A stop bounded by `shutdownTimeoutS` (SIGTERM/SIGINT): the lifecycle's close, raced against
 * the deadline. Past it, what was abandoned is logged and reported with exit status 1; the
 * abandoned runs stay non-terminal, so they resume elsewhere (expired leases) or at the next start.
 */
import type { Logger } from '../log.js';
import type { Store } from '../store/port.js';
import type { TaskService } from '../tasks/task-service.js';
import type { ResearchService } from '../research/research-service.js';
import type { ShutdownReport } from './types.js';
import type { Lifecycle } from './lifecycle.js';

export interface StopInputs {
  /** The daemon's close (the lifecycle's, announced). */
  close: () => Promise<void>;
  life: Pick<Lifecycle, 'currentStep'>;
  deadlineS: number;
  tasks: TaskService;
  store: Store;
  research: ResearchService;
  /** True once the task runs stopped (nothing of them is abandoned after that). */
  tasksStopped: () => boolean;
  log: Logger;
}

export function stopWithin(inputs: StopInputs): () => Promise<ShutdownReport> {
  const { close, life, deadlineS, tasks, store, research, log } = inputs;
  /**
   * The task runs whose stop had not finished by the deadline (a run that was aborted but whose
   * job could not be handed back counts too), each with its state if the store answers within a second.
   */
  const abandonedTasks = async (atStop: readonly string[]): Promise<Array<{ taskId: string; state: string }>> => {
    const ids = inputs.tasksStopped() ? [] : [...new Set([...atStop, ...tasks.runningTaskIds()])];
    const unknown = 'unknown (the store did not answer)';
    return Promise.all(ids.map(async (taskId) => {
      let timer: NodeJS.Timeout | undefined;
      const state = await Promise.race([
        store.getTask(taskId).then((t) => t?.state ?? unknown, () => unknown),
        new Promise<string>((r) => {
          timer = setTimeout(() => r(unknown), 1000);
        }),
      ]);
      clearTimeout(timer);
      return { taskId, state };
    }));
  };
  return async () => {
    const atStop = [...tasks.runningTaskIds()];
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      // A failed step is logged by the lifecycle (the later steps still ran).
      close().then(() => false, () => false),
      new Promise<true>((r) => {
        timer = setTimeout(() => r(true), deadlineS * 1000);
      }),
    ]);
    clearTimeout(timer);
    if (!timedOut) return { exitCode: 0, abandonedTasks: [], abandonedResearchRuns: 0 };
    const report: ShutdownReport = { exitCode: 1, stuckAt: life.currentStep, abandonedTasks: await abandonedTasks(atStop), abandonedResearchRuns: research.activeRuns() };
    log.error(
      { deadlineS, stuckAt: report.stuckAt, abandoned: report.abandonedTasks, abandonedResearchRuns: report.abandonedResearchRuns },
      'shutdown deadline passed: exiting with work abandoned (abandoned tasks stay unfinished and resume on another daemon once their leases expire, or at the next start)',
    );
    return report;
  };
}
