/**
 * Loopback-only fake origins for the egress tests. HARD RULE: these tests send traffic only to
 * loopback. Origins listen on 127.0.0.2 (reached through the guard's seams: an injected resolver
 * or a static override plus `allowCidrs: ['127.0.0.2/32']`), while 127.0.0.1 stays blocked; a
 * "sentinel" on 127.0.0.1 (same port) counts connections to prove a blocked hop never dialled.
 */
import http from 'node:http';
import net from 'node:net';
import { pino, type Logger } from 'pino';
import { expect } from 'vitest';
import { FusionError } from '../../../src/errors.js';
import type { ResolvedAddress, Resolver } from '../../../src/egress/host-vetting.js';

export const ORIGIN_IP = '127.0.0.2';
export const SENTINEL_IP = '127.0.0.1';
export const ORIGIN_CIDR = '127.0.0.2/32';

export interface Listener {
  readonly ip: string;
  readonly port: number;
  /** TCP connections accepted. */
  connections: number;
  /** TCP connections accepted and not closed yet. */
  open(): number;
  /** Request targets seen (HTTP origins) or first request lines (raw origins). */
  readonly requests: string[];
  /** Request headers seen (HTTP origins). */
  readonly headers: http.IncomingHttpHeaders[];
  close(): Promise<void>;
}

function track(server: net.Server, listener: { connections: number }): Set<net.Socket> {
  const sockets = new Set<net.Socket>();
  server.on('connection', (socket: net.Socket) => {
    listener.connections += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  return sockets;
}

async function listen(server: net.Server, ip: string, port: number): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, ip, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return (server.address() as net.AddressInfo).port;
}

function closer(server: net.Server, sockets: Set<net.Socket>): () => Promise<void> {
  return async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
}

export type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

export async function startHttpOrigin(handler: Handler, ip = ORIGIN_IP, port = 0): Promise<Listener> {
  const requests: string[] = [];
  const headers: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    requests.push(req.url ?? '');
    headers.push(req.headers);
    handler(req, res);
  });
  const state = { connections: 0 };
  const sockets = track(server, state);
  const bound = await listen(server, ip, port);
  return Object.assign(state, { ip, port: bound, requests, headers, open: () => sockets.size, close: closer(server, sockets) });
}

/** A TCP origin that writes whatever `respond` wants once the request head arrived. */
export async function startRawOrigin(respond: (socket: net.Socket, requestHead: string) => void, ip = ORIGIN_IP, port = 0): Promise<Listener> {
  const requests: string[] = [];
  const server = net.createServer((socket) => {
    let head = '';
    socket.on('error', () => undefined);
    const onData = (chunk: Buffer): void => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      requests.push(head.split('\r\n')[0] ?? '');
      respond(socket, head);
    };
    socket.on('data', onData);
  });
  const state = { connections: 0 };
  const sockets = track(server, state);
  const bound = await listen(server, ip, port);
  return Object.assign(state, { ip, port: bound, requests, headers: [], open: () => sockets.size, close: closer(server, sockets) });
}

/** Counts connections on 127.0.0.1:port and answers nothing useful. */
export async function startSentinel(port: number): Promise<Listener> {
  return startRawOrigin((socket) => socket.end('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 6\r\n\r\nLEAKED'), SENTINEL_IP, port);
}

/** An origin on 127.0.0.2 and a sentinel on 127.0.0.1 with the same port. */
export async function startOriginWithSentinel(handler: Handler): Promise<{ origin: Listener; sentinel: Listener }> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const origin = await startHttpOrigin(handler);
    try {
      const sentinel = await startSentinel(origin.port);
      return { origin, sentinel };
    } catch {
      await origin.close();
    }
  }
  throw new Error('could not bind an origin and a sentinel on the same port');
}

export interface RecordingResolver extends Resolver {
  calls: string[];
}

/** A resolver that answers from a per-host list of answer sets (the last set repeats). */
export function scriptedResolver(script: Record<string, Array<string[] | Error>>): RecordingResolver {
  const calls: string[] = [];
  const seen = new Map<string, number>();
  const resolve = async (host: string): Promise<ResolvedAddress[]> => {
    calls.push(host);
    const answers = script[host];
    if (answers === undefined) throw Object.assign(new Error(`queryA ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    const index = seen.get(host) ?? 0;
    seen.set(host, index + 1);
    const answer = answers[Math.min(index, answers.length - 1)];
    if (answer instanceof Error) throw answer;
    return (answer ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(resolve, { calls });
}

/** A resolver that fails the test if consulted. */
export function forbiddenResolver(): RecordingResolver {
  const calls: string[] = [];
  const resolve = async (host: string): Promise<ResolvedAddress[]> => {
    calls.push(host);
    throw new Error(`resolver must not be called (asked for ${host})`);
  };
  return Object.assign(resolve, { calls });
}

export interface CapturedLog {
  log: Logger;
  lines: Array<Record<string, unknown>>;
}

export function captureLog(): CapturedLog {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { log, lines };
}

/** Awaits a fetch that must fail, asserts it failed with a `FusionError`, and returns that error. */
export async function failure(promise: Promise<unknown>): Promise<FusionError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(FusionError);
    return err as FusionError;
  }
  throw new Error('expected the fetch to fail');
}
