/**
 * What the task layer asks of a workflow. The real implementation lives in `workflow/`; the
 * composition root passes it in, so `tasks/` never imports a workflow.
 */
import type { Store, TaskRecord, TransitionPatch } from '../store/port.js';
import type { TaskState } from '../contracts/task-state.js';
import type { SkipReport } from '../bundles/pack.js';

/**
 * The repository snapshot a task runs over (docs/operations.md#repository-snapshots): its digest,
 * how many entries and regular files it holds, and what the packer left out and why (the result
 * and the answer say so when the caller could not read files or the secrets rule left some out).
 */
export interface RepoSnapshotReport {
  digest: string;
  entries: number;
  /** Absent in a snapshot recorded before files were counted. */
  files?: number;
  skipped: SkipReport;
}

export interface TaskControl {
  readonly taskId: string;
  readonly store: Store;
  /** Moves the task from its current state to `to` (CAS). Throws `cancelled` if it was cancelled meanwhile. */
  transition(to: TaskState, patch?: TransitionPatch): Promise<TaskRecord>;
  /** Records a progress event (stage started/finished, attempt, counts) and publishes it. */
  progress(data: Record<string, unknown>): Promise<void>;
  /** Commits the result and moves merging → completed. */
  commit(result: Parameters<Store['commitResult']>[0], patch?: TransitionPatch): Promise<TaskRecord>;
}

export interface TaskRunContext {
  task: TaskRecord;
  control: TaskControl;
  /** Aborted on cancel and on daemon shutdown; every child must be gone when run() settles. */
  signal: AbortSignal;
  /** True when restart recovery resumes a task found non-terminal at start-up. */
  resume: boolean;
  /** The snapshot `task.repoDir` names (absent: the task reads the path it was submitted with). */
  repository?: RepoSnapshotReport;
}

export interface TaskRunner {
  /**
   * Drives the task to `completed` (through `control.commit`). Throwing a FusionError fails the
   * task with that code; the task service records it with the state it was in.
   */
  run(ctx: TaskRunContext): Promise<void>;
}
