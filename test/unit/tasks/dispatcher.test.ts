import { describe, expect, it } from 'vitest';
import { createDirectDispatcher } from '../../../src/tasks/dispatcher.js';

function deferred(): { promise: Promise<void>; resolve: () => void; reject: (e: Error) => void } {
  let resolve!: () => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('direct dispatcher', () => {
  it('starts nothing in the dispatching turn (the receipt answers first)', async () => {
    const d = createDirectDispatcher(1);
    let started = false;
    d.dispatch('t1', async () => {
      started = true;
    });
    expect(started).toBe(false);
    expect(d.queued).toBe(1);
    await tick();
    expect(started).toBe(true);
  });

  it('runs at most `concurrency` jobs at once, the rest in arrival order', async () => {
    const d = createDirectDispatcher(2);
    const gates = [deferred(), deferred(), deferred(), deferred()];
    const order: number[] = [];
    gates.forEach((g, i) =>
      d.dispatch(`t${i}`, async () => {
        order.push(i);
        await g.promise;
      }),
    );
    await tick();
    expect(order).toEqual([0, 1]);
    expect(d.running).toBe(2);
    expect(d.queued).toBe(2);
    gates[1]!.resolve();
    await tick();
    await tick();
    expect(order).toEqual([0, 1, 2]);
    gates[0]!.resolve();
    gates[2]!.resolve();
    gates[3]!.resolve();
    for (let i = 0; i < 10 && order.length < 4; i++) await tick();
    await d.drain();
    expect(order).toEqual([0, 1, 2, 3]);
    expect(d.running).toBe(0);
  });

  it('a failing job frees its slot for the next', async () => {
    const d = createDirectDispatcher(1);
    let second = false;
    d.dispatch('bad', async () => {
      throw new Error('boom');
    });
    d.dispatch('good', async () => {
      second = true;
    });
    for (let i = 0; i < 5 && !second; i++) await tick();
    expect(second).toBe(true);
  });

  it('drain drops queued jobs and waits for the running ones', async () => {
    const d = createDirectDispatcher(1);
    const gate = deferred();
    let queuedRan = false;
    let runningDone = false;
    d.dispatch('a', async () => {
      await gate.promise;
      runningDone = true;
    });
    d.dispatch('b', async () => {
      queuedRan = true;
    });
    await tick();
    const drained = d.drain();
    gate.resolve();
    await drained;
    expect(runningDone).toBe(true);
    expect(queuedRan).toBe(false);
    expect(d.queued).toBe(0);
  });
});
