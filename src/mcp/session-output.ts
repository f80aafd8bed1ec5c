/**
 * The session's side of stdout: one JSON-RPC message per line, the `notifications/message` an
 * agent waits for instead of polling, and the backpressure wait that keeps a client which does
 * not read its replies from making this process buffer them.
 */
import type { Writable } from 'node:stream';

/** Writes one JSON-RPC 2.0 message (`jsonrpc` added) as a line. */
export type Send = (message: Record<string, unknown>) => void;

export function lineSender(output: Writable): Send {
  return (message) => void output.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`);
}

/** A `notifications/message` at level info from the `fusion` logger (a task's or a run's end). */
export function announcer(send: Send): (data: unknown) => void {
  return (data) => send({ method: 'notifications/message', params: { level: 'info', logger: 'fusion', data } });
}

/** Resolves once `output` has room again (or can take no more writes at all). */
export function outputDrained(output: Writable): Promise<void> {
  if (!output.writableNeedDrain || output.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      output.off('drain', done);
      output.off('close', done);
      output.off('error', done);
      resolve();
    };
    output.on('drain', done);
    output.on('close', done);
    output.on('error', done);
  });
}
