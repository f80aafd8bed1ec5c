/**
 * The owner memo of a non-privileged caller's all-tasks stream forgets each task at its terminal
 * event (a stream following for days must not hold an entry per task the daemon ran).
 */
import { describe, expect, it } from 'vitest';
import { ownedEventsFilter } from '../../../src/api/owned-events.js';
import type { TaskEvent, TaskEventKind } from '../../../src/store/port.js';

let seq = 0;
const event = (taskId: string, kind: TaskEventKind): TaskEvent => ({ seq: ++seq, taskId, at: new Date().toISOString(), kind, data: {} });

describe('ownedEventsFilter', () => {
  it('passes only the caller\'s tasks, looks each owner up once, and remembers nothing after the terminal events', async () => {
    const owners: Record<string, number> = { mine: 1000, theirs: 2000 };
    const lookups: string[] = [];
    const filter = ownedEventsFilter(async (id) => {
      lookups.push(id);
      return owners[id];
    }, 1000);
    for (let i = 0; i < 3; i++) {
      expect(await filter.accepts(event('mine', 'progress'))).toBe(true);
      expect(await filter.accepts(event('theirs', 'progress'))).toBe(false);
    }
    expect(lookups).toEqual(['mine', 'theirs']);
    expect(filter.remembered).toBe(2);
    expect(await filter.accepts(event('mine', 'terminal'))).toBe(true);
    expect(await filter.accepts(event('theirs', 'terminal'))).toBe(false);
    expect(filter.remembered).toBe(0);
    // A task gone from the store (or without an owner) is nobody's.
    expect(await filter.accepts(event('gone', 'terminal'))).toBe(false);
    expect(filter.remembered).toBe(0);
  });
});
