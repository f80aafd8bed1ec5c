/**
 * The Fusion task state machine (docs/behaviour.md#b2) as one union type and one transition table.
 * Every change of `tasks.state` in the store goes through `assertTransition`.
 */
import { FusionError } from '../errors.js';

export const TASK_STATES = [
  'initializing', // receipt issued after durable preflight; no child started yet
  'queued', // accepted, waiting for a free run slot (the daemon runs taskConcurrency at once)
  'candidates_running', // the three candidate sandboxes are being launched or are running
  'candidates_complete', // all three candidate answers verified and checkpointed
  'evaluating', // the blind evaluator (and at most one repair) is running
  'evaluation_complete', // a schema-valid evaluation is checkpointed
  'merging', // the merger is running
  'completed', // the result is committed with its digests (terminal)
  'failed', // a stage failed, or the daemon restarted and could not resume (terminal)
  'cancelled', // a caller cancelled the task (terminal)
] as const;

export type TaskState = (typeof TASK_STATES)[number];

export const TERMINAL_STATES: ReadonlySet<TaskState> = new Set(['completed', 'failed', 'cancelled']);

const ABORT_EXITS: readonly TaskState[] = ['failed', 'cancelled'];

/** Allowed next states. Any non-terminal state may fail or be cancelled; terminal states have no exits. */
export const TRANSITIONS: Readonly<Record<TaskState, readonly TaskState[]>> = {
  initializing: ['queued', 'candidates_running', ...ABORT_EXITS],
  queued: ['candidates_running', ...ABORT_EXITS],
  candidates_running: ['candidates_complete', ...ABORT_EXITS],
  candidates_complete: ['evaluating', ...ABORT_EXITS],
  evaluating: ['evaluation_complete', ...ABORT_EXITS],
  evaluation_complete: ['merging', ...ABORT_EXITS],
  merging: ['completed', ...ABORT_EXITS],
  completed: [],
  failed: [],
  cancelled: [],
};

export function isTerminal(state: TaskState): boolean {
  return TERMINAL_STATES.has(state);
}

export function canTransition(from: TaskState, to: TaskState): boolean {
  return TRANSITIONS[from].includes(to);
}

export function assertTransition(from: TaskState, to: TaskState): void {
  if (!canTransition(from, to)) {
    throw new FusionError('invalid_transition', `task cannot move from ${from} to ${to}`, { details: { from, to } });
  }
}

export function isTaskState(value: string): value is TaskState {
  return (TASK_STATES as readonly string[]).includes(value);
}

/** Public status for notifications (docs/behaviour.md#f2): running until terminal. */
export type TaskStatus = 'running' | 'completed' | 'failed' | 'cancelled';

export function statusOf(state: TaskState): TaskStatus {
  return isTerminal(state) ? (state as TaskStatus) : 'running';
}
