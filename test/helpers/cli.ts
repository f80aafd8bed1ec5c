/**
 * The compiled `fusion` command and other node scripts (fixture daemons) for tests that drive them
 * as a user would: `runCli` runs the command to the end; `startCli` and `startScript` start one (a
 * daemon, a waiting client) and keep everything it writes, so a test waits on what it printed
 * (`waitForText`) instead of on the clock, and `stop` ends it whatever state it is in.
 */
import { spawn, spawnSync, type ChildProcessByStdio } from 'node:child_process';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { DIST } from './gates.js';

export const CLI = join(DIST, 'src', 'cli', 'main.js');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `fusion ARGS` to its exit with `env` over this process's environment. */
export function runCli(args: readonly string[], env: Record<string, string | undefined> = {}, timeoutMs = 60_000, input?: string): CliResult {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: timeoutMs, input });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Starts `fusion ARGS` (or a fixture script with `script`) with stdout and stderr piped. */
export function spawnCli(args: readonly string[], env: Record<string, string | undefined> = {}, script = CLI): ChildProcessByStdio<null, Readable, Readable> {
  return spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A process a test started, with everything it wrote so far. */
export interface Started {
  readonly proc: ChildProcessByStdio<null, Readable, Readable>;
  readonly pid: number;
  stdout(): string;
  stderr(): string;
  /** Settles when the process has exited (output may still be arriving: see `closed`). */
  readonly exited: Promise<Exit>;
  /**
   * Settles once the process exited and both its pipes ended: all its output is in. (A child it
   * left running with the pipes open holds this back.)
   */
  readonly closed: Promise<Exit>;
  /** Whether the process is still running. */
  running(): boolean;
  /**
   * The first match of `pattern` in everything the process wrote on `stream` (earlier output
   * counts); rejects when the process ends first or after `timeoutMs`, naming `what` and quoting
   * the output.
   */
  waitForText(stream: 'stdout' | 'stderr', pattern: RegExp, what: string, timeoutMs?: number): Promise<RegExpExecArray>;
  /**
   * Sends `signal` unless the process already ended, then SIGKILL if it is still running after
   * `graceMs`; resolves with its exit.
   */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<Exit>;
}

export interface StartOptions {
  /** Added to this process's environment, or the whole environment with `cleanEnv`. */
  env?: Record<string, string | undefined>;
  /** Start from `env` alone instead of this process's environment. */
  cleanEnv?: boolean;
  cwd?: string;
}

/** Starts `node SCRIPT ARGS` (a fixture daemon, a compiled entry point) with its output kept. */
export function startScript(script: string, args: readonly string[], options: StartOptions = {}): Started {
  return startCommand(process.execPath, [script, ...args], options);
}

/** Starts any command (`unshare`, `setpriv`, a shell) with its output kept (see `Started`). */
export function startCommand(command: string, args: readonly string[], options: StartOptions = {}): Started {
  const env = options.cleanEnv === true ? { ...options.env } : { ...process.env, ...options.env };
  const proc = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env, ...(options.cwd !== undefined ? { cwd: options.cwd } : {}) });
  const text = { stdout: '', stderr: '' };
  proc.stdout.on('data', (c: Buffer) => (text.stdout += c.toString()));
  proc.stderr.on('data', (c: Buffer) => (text.stderr += c.toString()));
  const exited = new Promise<Exit>((resolve) => proc.once('exit', (code: number | null, signal: NodeJS.Signals | null) => resolve({ code, signal })));
  // 'close' comes after 'exit', once both pipes ended: only then is the last output in `text`.
  let closed = false;
  const drained = new Promise<Exit>((resolve) =>
    proc.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
      closed = true;
      resolve({ code, signal });
    }),
  );
  const running = (): boolean => proc.exitCode === null && proc.signalCode === null;

  const waitForText = (stream: 'stdout' | 'stderr', pattern: RegExp, what: string, timeoutMs = 30_000): Promise<RegExpExecArray> =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const first = pattern.exec(text[stream]);
      if (first) return resolve(first);
      if (closed) return reject(new Error(`${what}: the process had already ended; its ${stream}: ${text[stream]}`));
      const source = proc[stream];
      const done = (): void => {
        clearTimeout(timer);
        source.removeListener('data', onData);
      };
      // Registered after the collector above, so `text` already holds the chunk.
      const onData = (): void => {
        const m = pattern.exec(text[stream]);
        if (m) {
          done();
          resolve(m);
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`${what}: not within ${String(timeoutMs)} ms; its ${stream}: ${text[stream]}${stream === 'stdout' ? `; its stderr: ${text.stderr}` : ''}`));
      }, timeoutMs);
      source.on('data', onData);
      void drained.then((exit) => {
        const m = pattern.exec(text[stream]);
        done();
        if (m) resolve(m);
        else reject(new Error(`${what}: the process ended (${String(exit.code ?? exit.signal)}) first; its ${stream}: ${text[stream]}${stream === 'stdout' ? `; its stderr: ${text.stderr}` : ''}`));
      });
    });

  const stop = async (signal: NodeJS.Signals = 'SIGTERM', graceMs = 10_000): Promise<Exit> => {
    if (running()) {
      proc.kill(signal);
      const late = setTimeout(() => {
        if (running()) proc.kill('SIGKILL');
      }, graceMs);
      try {
        return await exited;
      } finally {
        clearTimeout(late);
      }
    }
    return exited;
  };

  return {
    proc,
    pid: proc.pid!,
    stdout: () => text.stdout,
    stderr: () => text.stderr,
    exited,
    closed: drained,
    running,
    waitForText,
    stop,
  };
}

/** Starts `fusion ARGS` with its output kept (see `startScript`). */
export function startCli(args: readonly string[], options: StartOptions = {}): Started {
  return startScript(CLI, args, options);
}

export interface RunResult extends CliResult {
  signal: NodeJS.Signals | null;
  /** The command outlived `timeoutMs` and was killed (SIGKILL). */
  timedOut: boolean;
}

/**
 * Runs a command to its end without blocking this process (a daemon in this process keeps
 * answering it); SIGKILL after `timeoutMs`.
 */
export async function runCommand(command: string, args: readonly string[], options: StartOptions & { timeoutMs?: number } = {}): Promise<RunResult> {
  const started = startCommand(command, args, options);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    started.proc.kill('SIGKILL');
  }, options.timeoutMs ?? 240_000);
  const exit = await started.exited;
  clearTimeout(timer);
  // The output is complete once both pipes ended ('close'); a command's own children may hold
  // them open after it exited, so its own exit is what ends the run.
  return { code: exit.code, signal: exit.signal, stdout: started.stdout(), stderr: started.stderr(), timedOut };
}

/** A fixture daemon (test/fixtures/…-daemon.mjs) that said it is ready. */
export interface FixtureDaemon {
  readonly started: Started;
  readonly pid: number;
  /** The first word after READY: the daemon's socket. */
  readonly socket: string;
  /** The whole READY line. */
  readonly ready: RegExpExecArray;
  /** Its stdout lines so far (the fixtures' probes: ENTER, HUNG…). */
  lines(): string[];
  stderr(): string;
}

/**
 * Starts a fixture daemon script and waits for its `READY <socket> …` line on stdout; a daemon
 * that does not get there in `timeoutMs` is killed and the start fails with its output.
 */
export async function startFixtureDaemon(script: string, args: readonly string[], options: StartOptions = {}, timeoutMs = 60_000): Promise<FixtureDaemon> {
  const started = startScript(script, args, options);
  try {
    const ready = await started.waitForText('stdout', /^READY (\S+).*$/m, `${script} to be ready`, timeoutMs);
    return { started, pid: started.pid, socket: ready[1]!, ready, lines: () => started.stdout().split('\n').filter(Boolean), stderr: started.stderr };
  } catch (err) {
    await started.stop('SIGKILL');
    throw err;
  }
}
