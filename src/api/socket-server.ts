/**
 * HTTP/1.1 over a Unix socket created with mode 0600 (0660 for the --socket-group). The socket
 * is bound under a 0177 umask so there is no window in which another user could connect, then
 * chmod'ed explicitly as well. A stale socket file (nothing answering) is replaced; a live one
 * is an error.
 *
 * Every connection is tagged with its caller, read from the kernel when it is accepted
 * (docs/security.md#socket-callers); a connection whose caller cannot be read is closed unserved.
 */
import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { chmodSync, lstatSync, unlinkSync } from 'node:fs';
import { FusionError } from '../errors.js';
import type { CallerIdentity } from '../tasks/caller.js';
import { STRICT_SERVER_OPTIONS, answerAndClose, installClientErrorEnvelope } from './request-guard.js';
import type { PeerCredReader } from './peer-cred.js';
import { shareSocketWithGroup, type SocketGroup } from './socket-group.js';

export interface SocketListenOptions {
  /** 0660 for this group instead of 0600 (its directory is prepared by prepareGroupSocketDir). */
  group?: SocketGroup;
  /** Reads each connection's caller from the kernel; absent → every caller is `fallbackCaller`. */
  identify?: PeerCredReader;
  /** The caller of every connection when there is no reader (only the daemon's uid can connect then). */
  fallbackCaller?: CallerIdentity;
  /** Told when a connection is refused because its caller could not be read. */
  onIdentifyError?: (err: Error) => void;
  /**
   * At most this many open connections per caller uid (event streams and waits are held open):
   * one group member must not exhaust the daemon's descriptors for everyone. Callers for which
   * `unbounded` is true (root, the daemon's uid) are not counted.
   */
  perCaller?: { maxConnections: number; unbounded: (caller: CallerIdentity) => boolean };
  /** The request deadlines (request-guard.ts's HEADERS_TIMEOUT_MS / REQUEST_TIMEOUT_MS unless set; tests shorten them). */
  timeouts?: { headersTimeoutMs: number; requestTimeoutMs: number };
}

/** The default bound of open connections per non-privileged caller uid (docs/security.md#socket-callers). */
export const MAX_CONNECTIONS_PER_CALLER = 256;

const callers = new WeakMap<Socket, CallerIdentity>();

/** The kernel-reported caller of a socket request; undefined on other surfaces (TCP) and in-process tests. */
export function socketCaller(req: IncomingMessage): CallerIdentity | undefined {
  return callers.get(req.socket);
}

function socketAnswers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Throws when another daemon already answers on `path` (checked before start-up touches shared state). */
export async function assertNoLiveDaemon(path: string): Promise<void> {
  if (await socketAnswers(path)) throw new FusionError('invalid_config', `another daemon already answers on ${path}; stop it or choose another --socket/--data`);
}

export async function listenOnSocket(path: string, handler: RequestListener, options: SocketListenOptions = {}): Promise<Server> {
  let exists = false;
  try {
    const st = lstatSync(path);
    if (!st.isSocket()) throw new FusionError('invalid_config', `socket path ${path} exists and is not a socket; remove it or choose another --socket`);
    exists = true;
  } catch (err) {
    if (err instanceof FusionError) throw err;
  }
  if (exists) {
    if (await socketAnswers(path)) throw new FusionError('invalid_config', `another daemon already answers on ${path}; stop it or choose another --socket/--data`);
    unlinkSync(path);
  }
  // A connection refused at accept (over its caller's bound) has had its answer; whatever it
  // still sends must reach no route.
  const refused = new WeakSet<Socket>();
  const timeouts = options.timeouts === undefined ? {} : {
    headersTimeout: options.timeouts.headersTimeoutMs,
    requestTimeout: Math.max(options.timeouts.headersTimeoutMs, options.timeouts.requestTimeoutMs),
    connectionsCheckingInterval: Math.min(STRICT_SERVER_OPTIONS.connectionsCheckingInterval, options.timeouts.headersTimeoutMs),
  };
  const server = createServer({ ...STRICT_SERVER_OPTIONS, ...timeouts }, (req, res) => (refused.has(req.socket) ? req.socket.destroy() : handler(req, res)));
  installClientErrorEnvelope(server);
  const { identify, fallbackCaller } = options;
  if (identify !== undefined || fallbackCaller !== undefined) {
    // Read once per connection, at accept: SO_PEERCRED is the peer's identity at connect(2).
    const open = new Map<number, number>();
    server.on('connection', (socket: Socket) => {
      let caller: CallerIdentity;
      try {
        caller = identify !== undefined ? identify(socket) : fallbackCaller!;
      } catch (err) {
        options.onIdentifyError?.(err as Error);
        socket.destroy();
        return;
      }
      callers.set(socket, caller);
      const bound = options.perCaller;
      if (bound === undefined || bound.unbounded(caller)) return;
      const held = open.get(caller.uid) ?? 0;
      if (held >= bound.maxConnections) {
        refused.add(socket);
        answerAndClose(socket, new FusionError('busy', `uid ${caller.uid} already holds ${held} open connections to the daemon (limit ${bound.maxConnections}); close some (event streams, waits) and retry`, {
          details: { scope: 'connections', limit: bound.maxConnections, retryAfterSeconds: 1 },
        }));
        return;
      }
      open.set(caller.uid, held + 1);
      socket.once('close', () => {
        const left = (open.get(caller.uid) ?? 1) - 1;
        if (left <= 0) open.delete(caller.uid);
        else open.set(caller.uid, left);
      });
    });
  }
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    const previous = process.umask(0o177);
    try {
      // A flood of clients connecting at once must wait in the backlog, not fail with EAGAIN
      // (Node's default is 511; the kernel caps it at net.core.somaxconn).
      server.listen({ path, backlog: 4096 }, () => {
        server.off('error', reject);
        resolve();
      });
    } finally {
      process.umask(previous);
    }
  });
  chmodSync(path, 0o600);
  if (options.group !== undefined) shareSocketWithGroup(path, options.group);
  return server;
}

/** One closeServer for the API and the broker (src/http/http-util.ts). */
export { closeServer } from '../http/http-util.js';
