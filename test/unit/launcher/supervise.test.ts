/**
 * The supervision core every backend shares (src/launcher/supervise.ts), driven by a fake
 * backend and a manual clock: output caps, wall/idle deadlines, /out caps, abort, the kill
 * sequence and the exit record, deterministically (no real timers, no processes).
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/log.js';
import { DEFAULT_SANDBOX_LIMITS, type SandboxLimits } from '../../../src/launcher/port.js';
import { supervise, type SupervisedBackend, type SupervisionClock, OUT_DIR_POLL_MS } from '../../../src/launcher/supervise.js';

/** A clock whose time moves only when the test says so. */
class ManualClock implements SupervisionClock {
  private t = 0;
  private seq = 0;
  private timers = new Map<number, { at: number; fn: () => void }>();
  now(): number {
    return this.t;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + ms, fn });
    return id;
  }
  clearTimeout(timer: unknown): void {
    this.timers.delete(timer as number);
  }
  pending(): number {
    return this.timers.size;
  }
  /** Moves time forward, firing due timers in order (and letting promise callbacks run between them). */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      await flush();
      const due = [...this.timers.entries()].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at || a[0] - b[0])[0];
      if (due === undefined) break;
      this.timers.delete(due[0]);
      this.t = Math.max(this.t, due[1].at);
      due[1].fn();
    }
    this.t = end;
    await flush();
  }
}

async function flush(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

interface FakeBackend extends SupervisedBackend {
  calls: string[];
}

function fakeBackend(overrides: Partial<SupervisedBackend> = {}): FakeBackend {
  const calls: string[] = [];
  return {
    calls,
    pid: () => 4242,
    terminate: async () => {
      calls.push('term');
    },
    hardKill: async () => {
      calls.push('kill');
    },
    inspect: async () => {
      calls.push('inspect');
      return { extra: 1 };
    },
    ...overrides,
  };
}

const LIMITS: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, wallMs: 10_000, idleMs: 4_000, maxStdoutBytes: 10, maxStderrBytes: 5, killGraceMs: 1_000 };

function setup(options: { limits?: Partial<SandboxLimits>; backend?: Partial<SupervisedBackend>; signal?: AbortSignal; outDir?: () => Promise<string | null> } = {}) {
  const clock = new ManualClock();
  const backend = fakeBackend(options.backend);
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  const s = supervise({
    spec: {
      taskId: 't1', label: 'candidate-1.attempt-1', outDir: '/nonexistent-out', limits: { ...LIMITS, ...options.limits },
      onStdout: (c) => stdout.push(c), onStderr: (c) => stderr.push(c),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    },
    backend, log: silentLogger(), startedAt: 0, clock,
    checkOutDir: options.outDir ?? (async () => null),
  });
  return { clock, backend, s, stdout, stderr };
}

describe('supervise: output caps (the same rule on every backend)', () => {
  it('allows exactly the cap, delivers nothing beyond it, and stops at the first byte over', async () => {
    const { s, stdout, backend, clock } = setup();
    s.started();
    s.output('stdout', Buffer.from('0123456789')); // exactly 10: allowed
    await clock.advance(0);
    expect(backend.calls).toEqual([]);
    s.output('stdout', Buffer.alloc(0)); // an empty chunk is no byte over the cap
    await clock.advance(0);
    expect(backend.calls).toEqual([]);
    s.output('stdout', Buffer.from('X'));
    await clock.advance(0);
    expect(backend.calls).toEqual(['term']);
    expect(Buffer.concat(stdout).toString()).toBe('0123456789');
    s.exited({ code: 143, signal: null });
    const exit = await s.handle.exit;
    expect(exit).toMatchObject({ reason: 'output_cap', stdoutBytes: 11, stdoutTail: '0123456789', signal: 'SIGTERM', exitCode: 143 });
  });

  it('cuts a chunk that crosses the cap at the cap', async () => {
    const { s, stderr, clock } = setup();
    s.started();
    s.output('stderr', Buffer.from('abcdefgh'));
    await clock.advance(0);
    expect(Buffer.concat(stderr).toString()).toBe('abcde');
    s.exited({ code: 1, signal: null });
    expect(await s.handle.exit).toMatchObject({ reason: 'output_cap', stderrBytes: 8, stderrTail: 'abcde' });
  });
});

describe('supervise: kill sequence', () => {
  it('terminates, waits the grace, then hard-kills', async () => {
    const { s, backend, clock } = setup();
    s.started();
    void s.handle.kill('aborted');
    await clock.advance(0);
    expect(backend.calls).toEqual(['term']);
    await clock.advance(999);
    expect(backend.calls).toEqual(['term']);
    await clock.advance(1);
    expect(backend.calls).toEqual(['term', 'kill']);
    s.exited({ code: null, signal: 'SIGKILL' });
    expect(await s.handle.exit).toMatchObject({ reason: 'aborted', signal: 'SIGKILL' });
  });

  it('repeats terminate during the grace when the backend asks (new processes get their TERM)', async () => {
    const { s, backend, clock } = setup({ backend: { termRepeatMs: 300 } });
    s.started();
    void s.handle.kill();
    await clock.advance(1_000);
    // t=0, 300, 600, 900 and the last slice at 1000, then the hard kill.
    expect(backend.calls).toEqual(['term', 'term', 'term', 'term', 'term', 'kill']);
  });

  it('no hard kill once the sandbox exited within the grace', async () => {
    const { s, backend, clock } = setup();
    s.started();
    void s.handle.kill();
    await clock.advance(10);
    s.exited({ code: 0, signal: null });
    await clock.advance(5_000);
    expect(backend.calls).toEqual(['term', 'inspect']);
    expect(clock.pending()).toBe(0);
  });

  it('the first reason wins', async () => {
    const { s, clock } = setup();
    s.started();
    void s.handle.kill('idle_timeout');
    void s.handle.kill('aborted');
    await clock.advance(0);
    s.exited({ code: 0, signal: null });
    expect((await s.handle.exit).reason).toBe('idle_timeout');
  });

  it('a kill during start-up waits for the backend, then takes the grace path when the command started', async () => {
    const { s, backend, clock } = setup();
    void s.handle.kill();
    await clock.advance(5_000);
    expect(backend.calls).toEqual([]);
    s.started();
    await clock.advance(0);
    expect(backend.calls).toEqual(['term']);
  });

  it('a command that never ran is hard-killed at once', async () => {
    const { s, backend, clock } = setup();
    void s.handle.kill();
    s.notStarted();
    await clock.advance(0);
    expect(backend.calls).toEqual(['kill']);
  });

  it('kill after the exit resolves at once and signals nothing', async () => {
    const { s, backend } = setup();
    s.started();
    s.exited({ code: 0, signal: null });
    await s.handle.kill();
    await s.handle.exit;
    expect(backend.calls).toEqual(['inspect']);
  });

  it('measures /out one last time before the backend inspects (and may free) it', async () => {
    const order: string[] = [];
    const { s } = setup({
      outDir: async () => {
        order.push('measure');
        return 'more than 1 bytes in /out';
      },
      backend: {
        inspect: async () => {
          order.push('inspect');
          return {};
        },
      },
    });
    s.started();
    s.exited({ code: 0, signal: null });
    const exit = await s.handle.exit;
    expect(order).toEqual(['measure', 'inspect']);
    expect(exit.outDirOverflow).toBe('more than 1 bytes in /out');
  });
});

describe('supervise: deadlines', () => {
  it('wall clock', async () => {
    const { s, backend, clock } = setup({ limits: { idleMs: 60_000 } });
    s.started();
    await clock.advance(9_999);
    expect(backend.calls).toEqual([]);
    await clock.advance(1);
    expect(backend.calls).toEqual(['term']);
    s.exited({ code: 143, signal: null });
    expect((await s.handle.exit).reason).toBe('wall_timeout');
  });

  it('deadlines run from the start of the command, not from a slow start-up', async () => {
    const { s, backend, clock } = setup({ limits: { idleMs: 60_000 } });
    await clock.advance(30_000);
    s.started();
    await clock.advance(9_999);
    expect(backend.calls).toEqual([]);
    await clock.advance(1);
    expect(backend.calls).toEqual(['term']);
  });

  it('a command that never ran arms no deadline', async () => {
    const { s, clock } = setup();
    s.notStarted();
    expect(clock.pending()).toBe(0);
  });

  it('idle: output and markActivity push it back', async () => {
    const { s, backend, clock } = setup({ limits: { wallMs: 60_000 } });
    s.started();
    await clock.advance(3_000);
    s.output('stdout', Buffer.from('a'));
    await clock.advance(3_000);
    s.handle.markActivity();
    await clock.advance(3_999);
    expect(backend.calls).toEqual([]);
    await clock.advance(1);
    expect(backend.calls).toEqual(['term']);
    s.exited({ code: 0, signal: null });
    expect((await s.handle.exit).reason).toBe('idle_timeout');
  });
});

describe('supervise: abort', () => {
  it('an abort signal kills with reason aborted', async () => {
    const controller = new AbortController();
    const { s, backend, clock } = setup({ signal: controller.signal });
    s.started();
    controller.abort();
    await clock.advance(0);
    expect(backend.calls).toEqual(['term']);
    s.exited({ code: 0, signal: null });
    expect((await s.handle.exit).reason).toBe('aborted');
  });

  it('an already aborted signal kills as soon as the command started', async () => {
    const controller = new AbortController();
    controller.abort();
    const { s, backend, clock } = setup({ signal: controller.signal });
    s.started();
    await clock.advance(0);
    expect(backend.calls).toEqual(['term']);
  });
});

describe('supervise: /out caps', () => {
  it('polls /out and stops the sandbox with output_cap and the reason in the exit record', async () => {
    let answer: string | null = null;
    const { s, backend, clock } = setup({ outDir: async () => answer, limits: { idleMs: 60_000 } });
    s.started();
    await clock.advance(OUT_DIR_POLL_MS * 3);
    expect(backend.calls).toEqual([]);
    answer = 'more than 64 files in /out';
    await clock.advance(OUT_DIR_POLL_MS);
    expect(backend.calls).toEqual(['term']);
    s.exited({ code: 143, signal: null });
    expect(await s.handle.exit).toMatchObject({ reason: 'output_cap', outDirOverflow: 'more than 64 files in /out' });
  });
});

describe('supervise: exit record', () => {
  it('128+N without a signal is signal N (signaled); a plain code is exited', async () => {
    const a = setup();
    a.s.started();
    a.s.exited({ code: 137, signal: null });
    expect(await a.s.handle.exit).toMatchObject({ reason: 'signaled', signal: 'SIGKILL', exitCode: 137 });
    const b = setup();
    b.s.started();
    b.s.exited({ code: 3, signal: null });
    expect(await b.s.handle.exit).toMatchObject({ reason: 'exited', signal: null, exitCode: 3 });
  });

  it('durations count from the launch; inspect runs once; a failing inspect still settles', async () => {
    const { s, clock, backend } = setup({ backend: { inspect: async () => { throw new Error('engine gone'); } } });
    s.started();
    await clock.advance(1_234);
    s.exited({ code: 0, signal: null });
    s.exited({ code: 1, signal: null });
    expect(await s.handle.exit).toMatchObject({ reason: 'exited', exitCode: 0, durationMs: 1_234 });
    expect(backend.calls).toEqual([]);
    expect(clock.pending()).toBe(0);
  });

  it('reports the backend pid', () => {
    const { s } = setup();
    expect(s.handle.pid).toBe(4242);
  });
});

describe('supervise: /out measured once more at exit', () => {
  it('a child that fills /out after the last poll and exits cleanly still gets outDirOverflow', async () => {
    let answer: string | null = null;
    const { s, clock } = setup({ outDir: async () => answer, limits: { idleMs: 60_000 } });
    s.started();
    await clock.advance(OUT_DIR_POLL_MS);
    answer = `more than ${8} bytes in /out`;
    s.exited({ code: 0, signal: null });
    expect(await s.handle.exit).toMatchObject({ reason: 'exited', exitCode: 0, outDirOverflow: 'more than 8 bytes in /out' });
  });

  it('a sandbox that never ran is not measured', async () => {
    let asked = 0;
    const { s } = setup({ outDir: async () => {
      asked += 1;
      return 'x';
    } });
    s.notStarted();
    s.exited({ code: 1, signal: null });
    expect((await s.handle.exit).outDirOverflow).toBeUndefined();
    expect(asked).toBe(0);
  });
});
