/**
 * Waiting on state, never on the clock: a test that needs something to have happened polls for
 * it (or listens for it) with a deadline, and fails naming what it waited for. A fixed sleep
 * either wastes time or, on a loaded machine, is too short.
 */
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls `probe` every `stepMs` until it returns something other than undefined, null or false,
 * and returns that; throws after `timeoutMs` with `what` in the message.
 */
export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  timeoutMs = 20_000,
  stepMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== null && value !== false) return value;
    if (Date.now() >= deadline) throw new Error(`timed out after ${String(timeoutMs)} ms waiting for ${what}`);
    await sleep(stepMs);
  }
}

/** A process whose output a test waits on. */
export interface OutputSource {
  stdout?: Readable | null;
  stderr?: Readable | null;
  once(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): unknown;
  removeListener(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): unknown;
}

/**
 * Resolves with the first match of `pattern` in everything `proc` wrote on `stream` (from the
 * moment of the call); rejects when the process exits first or after `timeoutMs`, with `what` and
 * the output so far in the message.
 */
export function waitForOutput(proc: OutputSource, stream: 'stdout' | 'stderr', pattern: RegExp, what: string, timeoutMs = 30_000): Promise<RegExpExecArray> {
  const source = proc[stream];
  if (!source) return Promise.reject(new Error(`${what}: the process has no ${stream} pipe`));
  return new Promise<RegExpExecArray>((resolve, reject) => {
    let text = '';
    const done = (): void => {
      clearTimeout(timer);
      source.removeListener('data', onData);
      proc.removeListener('exit', onExit);
    };
    const onData = (chunk: Buffer | string): void => {
      text += chunk.toString();
      const m = pattern.exec(text);
      if (m) {
        done();
        resolve(m);
      }
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
      done();
      reject(new Error(`${what}: the process exited (${String(code ?? signal)}) first; its ${stream}: ${text}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`${what}: not within ${String(timeoutMs)} ms; its ${stream}: ${text}`));
    }, timeoutMs);
    source.on('data', onData);
    proc.once('exit', onExit);
  });
}

/** `promise`'s outcome, or a rejection naming `what` once `timeoutMs` passed first. */
export async function within<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${String(timeoutMs)} ms waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
