/**
 * In-process fan-out of committed task events to waiting clients (wait, event stream, MCP).
 * Events are published only after the store committed them, so a listener never sees a state
 * the store does not have.
 */
import { EventEmitter } from 'node:events';
import type { TaskEvent } from '../store/port.js';

export class TaskEventBus {
  private readonly emitter = new EventEmitter();

  constructor() {
    // Many concurrent waiters are normal (one per long-poll or stream).
    this.emitter.setMaxListeners(0);
  }

  publish(event: TaskEvent): void {
    this.emitter.emit('event', event);
    this.emitter.emit(`task:${event.taskId}`, event);
  }

  /** Whether anyone listens to `taskId`'s events (its own listeners, or all tasks'). */
  listening(taskId: string): boolean {
    return this.emitter.listenerCount('event') > 0 || this.emitter.listenerCount(`task:${taskId}`) > 0;
  }

  /** Subscribes to one task's events (or all with `*`); returns the unsubscribe function. */
  subscribe(taskId: string | '*', listener: (event: TaskEvent) => void): () => void {
    const name = taskId === '*' ? 'event' : `task:${taskId}`;
    this.emitter.on(name, listener);
    return () => this.emitter.off(name, listener);
  }
}
