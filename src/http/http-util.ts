/**
 * The HTTP helpers the daemon API (src/api/) and the broker (src/broker/) share: one JSON reply
 * and one way to close a server on a Unix socket. What differs between the two stays with each:
 * the API's strict JSON body reader and its error envelope with details; the broker's raw body
 * reader and its redacted envelope without details.
 */
import { unlinkSync } from 'node:fs';
import type { Server, ServerResponse } from 'node:http';

/**
 * Answers `body` as JSON with its exact length; returns the bytes written. `close` asks the
 * client to close the connection (the broker serves one request per connection). A reply whose
 * headers already went out is only ended.
 */
export function sendJson(res: ServerResponse, status: number, body: unknown, options: { close?: boolean } = {}): number {
  const bytes = Buffer.from(JSON.stringify(body), 'utf8');
  if (!res.headersSent) {
    res.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': String(bytes.length),
      ...(options.close === true ? { connection: 'close' } : {}),
    });
  }
  res.end(bytes);
  return bytes.length;
}

/**
 * Stops listening, cuts the open connections (long-polls and event streams would hold close()
 * open) and removes the socket file, if any.
 */
export async function closeServer(server: Server, socketPath?: string): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  await closed;
  if (socketPath !== undefined) {
    try {
      unlinkSync(socketPath);
    } catch {
      /* already gone */
    }
  }
}
