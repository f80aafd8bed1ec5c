/**
 * Small helpers both backends use to report how a sandboxed process ended: a bounded tail of its
 * output streams (for error messages) and the name of a terminating signal.
 */
import { constants as osConstants } from 'node:os';

/** Keeps the last `max` bytes of a stream. */
export class Tail {
  private chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly max: number) {}
  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.chunks.length > 1 && this.size - (this.chunks[0]?.length ?? 0) >= this.max) {
      this.size -= this.chunks.shift()?.length ?? 0;
    }
  }
  toString(): string {
    const all = Buffer.concat(this.chunks);
    return all.subarray(Math.max(0, all.length - this.max)).toString('utf8');
  }
}

/** `SIGKILL` for 9, or null for a number that is not a signal. */
export function signalName(code: number): string | null {
  return Object.entries(osConstants.signals).find(([, n]) => n === code)?.[0] ?? null;
}
