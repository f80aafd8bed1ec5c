/**
 * Talking to the Docker engine without dockerode's error shapes leaking upward: the attach
 * stream's framing, an engine error's message and whether it is transient, and a bound on calls
 * that an engine may never answer.
 */
import type { Readable } from 'node:stream';

const TRANSIENT_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EAGAIN', 'ENOENT', 'EMFILE', 'ENFILE', 'ABORT_ERR']);

/** Splits Docker's multiplexed attach stream (8-byte header: stream id, 3 zero bytes, u32 BE size). */
export function demux(stream: Readable, onFrame: (kind: 'stdout' | 'stderr', payload: Buffer) => void): void {
  let pending: Buffer = Buffer.alloc(0);
  stream.on('data', (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 8) {
      const size = pending.readUInt32BE(4);
      if (pending.length < 8 + size) break;
      const kind = pending[0] === 2 ? 'stderr' : 'stdout';
      onFrame(kind, pending.subarray(8, 8 + size));
      pending = pending.subarray(8 + size);
    }
  });
}

export interface EngineError {
  statusCode?: number;
  code?: string;
  message?: string;
  json?: { message?: string } | null;
}

export function engineMessage(err: unknown): string {
  const e = (err ?? {}) as EngineError;
  return e.json?.message ?? e.message ?? String(err);
}

export function isTransient(err: unknown): boolean {
  const e = (err ?? {}) as EngineError;
  if (e.code !== undefined && TRANSIENT_CODES.has(e.code)) return true;
  if (e.statusCode === 503) return true;
  return e.statusCode === 500 && /resource temporarily unavailable|too many open files|no space left|timeout|connection reset/i.test(engineMessage(err));
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`${what} did not answer within ${ms} ms`), { code: 'ETIMEDOUT' })), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
