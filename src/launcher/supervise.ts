/**
 * The supervision core every backend shares: output caps, the wall and idle deadlines, the /out
 * caps, abort, the kill sequence and the exit record are written here once. A backend only says
 * how to signal its sandbox (`terminate`, `hardKill`), what to look at and free once it has
 * exited (`inspect`), and reports the life events it observes: output (`output`), the command
 * may be running (`started`) or never ran (`notStarted`), and the process is gone (`exited`).
 *
 * Rules (the same on every backend):
 * - Output: exactly `maxStdoutBytes` bytes are allowed; the first byte beyond the cap stops the
 *   sandbox (`output_cap`). Consumers and the tail never see a byte beyond the cap; the byte
 *   counts in the exit record count everything that arrived. (An empty chunk never trips the
 *   cap: the cap is about bytes, not about calls.)
 * - Deadlines run from `started()`, when the command may run (start-up has its own bounds in each
 *   backend: bwrap's handshake timeout, the engine's call timeouts). Idle = no output and no
 *   `markActivity()`.
 * - /out: polled while the sandbox lives; more files (at any depth) or bytes than its caps stop
 *   the sandbox (`output_cap`), and the exit record says why (`outDirOverflow`). It is measured
 *   once more at exit, before the backend's `inspect` (which may copy /out off its capped file
 *   system and free it), so writes after the last poll are not missed (the exit record then
 *   carries `outDirOverflow` with the reason it exited for). Where the kernel caps /out
 *   (`out-mount.ts`) the poll only turns a refused write into `output_cap`: no byte beyond the cap
 *   exists to be measured.
 * - Kill: a kill requested before the command may run waits for the backend to say whether it
 *   started (killing mid-start-up can strand half-made sandboxes); a command that never ran is
 *   hard-killed at once. Otherwise `terminate`, again every `termRepeatMs` during the grace if the
 *   backend asks for it (new processes may appear after the first round), then `hardKill` once
 *   `killGraceMs` has passed. The first reason wins.
 * - Exit record: a raw exit code 128+N without a signal (bwrap, docker-init) is reported as signal
 *   N; the reason is the kill's reason, else `signaled` or `exited`.
 *
 * Time comes from `SupervisionClock`, so the unit tests drive it deterministically.
 */
import type { Logger } from '../log.js';
import { untrusted } from '../log.js';
import { outDirOverflow, type OutDirCaps } from './out-dir-usage.js';
import type { SandboxExit, SandboxExitReason, SandboxHandle, SandboxLimits, SandboxSpec } from './port.js';
import { Tail, signalName } from './process-output.js';

const TAIL_BYTES = 4096;
/** How often /out is measured while the sandbox runs. */
export const OUT_DIR_POLL_MS = 1_000;

export interface SupervisionClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(timer: unknown): void;
}

export const systemClock: SupervisionClock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
};

/** What a backend supplies: how to signal its sandbox and what to do once it is gone. */
export interface SupervisedBackend {
  /** Host pid of the outermost process, for diagnostics (may become known late). */
  pid(): number | undefined;
  /** SIGTERM to every process of the sandbox. */
  terminate(): Promise<void>;
  /** Repeat `terminate` this often during the grace period (bwrap: new processes get their TERM too). */
  termRepeatMs?: number;
  /** SIGKILL to every process of the sandbox. */
  hardKill(): Promise<void>;
  /** After the exit: frees what the sandbox held and returns fields for the exit log line. */
  inspect(): Promise<Record<string, unknown>>;
}

/** How the backend's process ended, as it saw it. */
export interface RawExitStatus {
  code: number | null;
  signal: string | null;
}

export interface SupervisionOptions {
  spec: Pick<SandboxSpec, 'taskId' | 'label' | 'limits' | 'signal' | 'onStdout' | 'onStderr' | 'outDir'>;
  backend: SupervisedBackend;
  log: Logger;
  /** `clock.now()` when the launch began (durations count from here). */
  startedAt: number;
  clock?: SupervisionClock;
  /** Measures /out (default: `outDirOverflow` over `spec.outDir` with the spec's caps). */
  checkOutDir?: () => Promise<string | null>;
}

export interface Supervision {
  readonly handle: SandboxHandle;
  /** Output the backend read from the sandbox. */
  output(stream: 'stdout' | 'stderr', chunk: Buffer): void;
  /** The command may be running: kills take the TERM → grace → KILL path. */
  started(): void;
  /** The command never ran: any kill is a hard kill at once. */
  notStarted(): void;
  /** The sandbox process is gone; settles `handle.exit` once `inspect` is done. */
  exited(status: RawExitStatus): void;
}

type Phase = 'starting' | 'running' | 'never-ran' | 'exited';

/** The /out caps of a spec (defaults when the limits name none). */
export function outDirCaps(limits: SandboxLimits): OutDirCaps {
  return { maxFiles: limits.maxOutFiles, maxBytes: limits.maxOutBytes };
}

export function supervise(options: SupervisionOptions): Supervision {
  const { spec, backend, log } = options;
  const clock = options.clock ?? systemClock;
  const limits = spec.limits;
  const checkOutDir = options.checkOutDir ?? (() => outDirOverflow(spec.outDir, outDirCaps(limits)));
  const tails = { stdout: new Tail(TAIL_BYTES), stderr: new Tail(TAIL_BYTES) };
  const bytes = { stdout: 0, stderr: 0 };
  const max = { stdout: limits.maxStdoutBytes, stderr: limits.maxStderrBytes };
  const sink = { stdout: spec.onStdout, stderr: spec.onStderr };
  let phase: Phase = 'starting';
  let killReason: SandboxExitReason | undefined;
  let killRequested = false;
  let killStarted = false;
  let outOverflow: string | undefined;
  let lastActivity = clock.now();
  const timers = new Set<unknown>();
  let resolveExit: (exit: SandboxExit) => void = () => undefined;
  const exit = new Promise<SandboxExit>((resolve) => {
    resolveExit = resolve;
  });

  const after = (ms: number, fn: () => void): void => {
    const timer = clock.setTimeout(() => {
      timers.delete(timer);
      fn();
    }, Math.max(0, ms));
    timers.add(timer);
  };

  const hardKill = (): void => {
    void backend.hardKill().catch(() => undefined);
  };

  const terminateWithGrace = async (): Promise<void> => {
    await backend.terminate().catch(() => undefined);
    const deadline = clock.now() + limits.killGraceMs;
    const tick = (): void => {
      if (phase === 'exited') return;
      const leftMs = deadline - clock.now();
      if (leftMs <= 0) return hardKill();
      const repeat = backend.termRepeatMs;
      if (repeat === undefined) return after(leftMs, tick);
      after(Math.min(repeat, leftMs), () => void backend.terminate().catch(() => undefined).finally(tick));
    };
    tick();
  };

  /** Runs the kill sequence once the phase allows it. */
  const proceed = (): void => {
    if (!killRequested || killStarted || phase === 'starting' || phase === 'exited') return;
    killStarted = true;
    if (phase === 'never-ran') hardKill();
    else void terminateWithGrace();
  };

  const kill = (reason: SandboxExitReason = 'aborted'): Promise<void> => {
    if (phase === 'exited') return Promise.resolve();
    killReason ??= reason;
    killRequested = true;
    proceed();
    return exit.then(() => undefined);
  };

  const output = (stream: 'stdout' | 'stderr', chunk: Buffer): void => {
    lastActivity = clock.now();
    if (chunk.length === 0) return;
    const before = bytes[stream];
    bytes[stream] = before + chunk.length;
    const cap = max[stream];
    if (before < cap) {
      const kept = bytes[stream] > cap ? chunk.subarray(0, cap - before) : chunk;
      tails[stream].push(kept);
      sink[stream]?.(kept);
    }
    if (bytes[stream] > cap) void kill('output_cap');
  };

  const armIdle = (delayMs: number): void => {
    after(delayMs, () => {
      const quietMs = clock.now() - lastActivity;
      if (quietMs >= limits.idleMs) void kill('idle_timeout');
      else armIdle(limits.idleMs - quietMs);
    });
  };

  const pollOutDir = (): void => {
    after(OUT_DIR_POLL_MS, () => {
      if (phase === 'exited' || outOverflow !== undefined) return;
      void checkOutDir().then((why) => {
        if (phase === 'exited') return;
        if (why === null) return pollOutDir();
        outOverflow = why;
        log.warn({ taskId: spec.taskId, label: spec.label, why }, 'sandbox /out over its cap; stopping the sandbox');
        void kill('output_cap');
      }, () => pollOutDir());
    });
  };

  /** Deadlines and the /out poll run while the command may run. */
  const armDeadlines = (): void => {
    lastActivity = clock.now();
    after(limits.wallMs, () => void kill('wall_timeout'));
    armIdle(limits.idleMs);
    pollOutDir();
  };

  const onAbort = (): void => void kill('aborted');
  spec.signal?.addEventListener('abort', onAbort, { once: true });
  if (spec.signal?.aborted) onAbort();

  const exited = (status: RawExitStatus): void => {
    if (phase === 'exited') return;
    const wasStarted = phase !== 'starting' && phase !== 'never-ran';
    phase = 'exited';
    for (const timer of timers) clock.clearTimeout(timer);
    timers.clear();
    spec.signal?.removeEventListener('abort', onAbort);
    const code = status.code;
    let signal = status.signal;
    if (signal === null && code !== null && code > 128 && code - 128 < 65) signal = signalName(code - 128);
    const reason: SandboxExitReason = killReason ?? (signal !== null ? 'signaled' : 'exited');
    // One last measure: a child that fills /out between two polls and exits before the next would
    // otherwise hand over more than the caps with a clean exit record.
    const finalOutCheck = outOverflow === undefined && wasStarted
      ? checkOutDir().then((why) => {
        if (why !== null) outOverflow = why;
      }, () => undefined)
      : Promise.resolve();
    // In this order: a backend's inspect may copy /out away and free its file system.
    const inspected = finalOutCheck.then(() => backend.inspect()).catch((err: unknown) => ({ inspectError: untrusted((err as Error).message, 300) }));
    void inspected.then((extra) => {
      const result: SandboxExit = {
        reason, exitCode: code, signal, durationMs: Math.round(clock.now() - options.startedAt),
        stdoutBytes: bytes.stdout, stderrBytes: bytes.stderr, stdoutTail: tails.stdout.toString(), stderrTail: tails.stderr.toString(),
        ...(outOverflow === undefined ? {} : { outDirOverflow: outOverflow }),
      };
      log.info({ taskId: spec.taskId, label: spec.label, pid: backend.pid(), reason, exitCode: code, signal,
        durationMs: result.durationMs, stdoutBytes: bytes.stdout, stderrBytes: bytes.stderr, outDirOverflow: outOverflow, ...extra,
        stderrTail: untrusted(result.stderrTail, 300) }, 'sandbox exited');
      resolveExit(result);
    });
  };

  const handle: SandboxHandle = {
    get pid() {
      return backend.pid();
    },
    exit,
    markActivity: () => {
      lastActivity = clock.now();
    },
    kill,
  };

  return {
    handle,
    output,
    started: () => {
      if (phase !== 'starting') return;
      phase = 'running';
      armDeadlines();
      proceed();
    },
    notStarted: () => {
      if (phase !== 'starting') return;
      phase = 'never-ran';
      proceed();
    },
    exited,
  };
}
