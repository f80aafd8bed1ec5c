/**
 * The bridge between committed task events and waiting clients: each committed event is put on
 * the bus once, in order, whoever committed it (this daemon, or another one of the cluster).
 */
import type { Store, TaskEvent } from '../store/port.js';
import type { TaskEventBus } from './event-bus.js';
import type { ClusterSignals } from './cluster-port.js';

/** Bus cursors kept for ended tasks (their late events); older ones are forgotten. */
export const MAX_ENDED_CURSORS = 256;

export class TaskEventPublisher {
  /** Bus cursor (seq of the last event put on the bus) per task that has not ended. */
  private readonly published = new Map<string, number>();
  /**
   * Cursors of recently ended tasks, oldest first, at most MAX_ENDED_CURSORS: a run stopped by a
   * cancel may still commit an event after the terminal one, and it is published once (not the
   * whole history again) without a cursor per ended task staying for the daemon's lifetime.
   */
  private readonly endedCursors = new Map<string, number>();

  /** `signals`: cluster mode, where the other daemons' waiters hear of what this daemon committed. */
  constructor(private readonly store: Store, private readonly bus: TaskEventBus, private readonly signals: ClusterSignals | undefined) {}

  /** Publishes the events this daemon committed that the bus has not seen yet, and tells the cluster. */
  async publishNew(taskId: string): Promise<void> {
    const events = await this.unpublished(taskId);
    if (events.length > 0) this.signals?.eventsCommitted(taskId);
    this.put(events);
  }

  /** Publishes the events another daemon of the cluster committed (it told the cluster already). */
  async publishRemote(taskId: string): Promise<void> {
    this.put(await this.unpublished(taskId));
  }

  private cursor(taskId: string): number {
    return this.published.get(taskId) ?? this.endedCursors.get(taskId) ?? 0;
  }

  private unpublished(taskId: string): Promise<TaskEvent[]> {
    return this.store.listEvents(taskId, this.cursor(taskId));
  }

  private put(events: readonly TaskEvent[]): void {
    for (const event of events) {
      if (event.seq <= this.cursor(event.taskId)) continue;
      this.advanceCursor(event);
      this.bus.publish(event);
    }
  }

  private advanceCursor(event: TaskEvent): void {
    const { taskId, seq } = event;
    if (event.kind !== 'terminal' && !this.endedCursors.has(taskId)) {
      this.published.set(taskId, seq);
      return;
    }
    this.published.delete(taskId);
    this.endedCursors.delete(taskId); // re-inserted as the newest
    this.endedCursors.set(taskId, seq);
    if (this.endedCursors.size > MAX_ENDED_CURSORS) {
      const oldest = this.endedCursors.keys().next().value;
      if (oldest !== undefined) this.endedCursors.delete(oldest);
    }
  }
}
