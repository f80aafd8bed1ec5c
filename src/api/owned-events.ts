/**
 * The all-tasks event stream of a non-privileged caller carries only its own tasks' events. Each
 * task's owner is looked up once per stream and remembered until the task's terminal event: a
 * stream can follow for days, and a memo kept for every task it ever saw would grow with each
 * task the daemon runs.
 */
import type { TaskEvent } from '../store/port.js';

export interface OwnedEventsFilter {
  /** True when the event's task belongs to the caller. */
  accepts(event: TaskEvent): Promise<boolean>;
  /** Tasks remembered now (for tests). */
  readonly remembered: number;
}

export function ownedEventsFilter(ownerUidOf: (taskId: string) => Promise<number | null | undefined>, uid: number): OwnedEventsFilter {
  const owners = new Map<string, boolean>();
  return {
    async accepts(event) {
      let mine = owners.get(event.taskId);
      if (mine === undefined) {
        mine = (await ownerUidOf(event.taskId)) === uid;
        owners.set(event.taskId, mine);
      }
      // Nothing follows the terminal event but, rarely, a cancelled run's last event: looked up again.
      if (event.kind === 'terminal') owners.delete(event.taskId);
      return mine;
    },
    get remembered() {
      return owners.size;
    },
  };
}
