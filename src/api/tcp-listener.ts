/**
 * The opt-in TCP listener (`fusion daemon --listen HOST:PORT`) for the research API. It serves
 * plain HTTP: API keys cross it in clear text. So a non-loopback address is refused unless the
 * admin says `--listen-public` (e.g. behind a TLS-terminating proxy). Which routes it serves is
 * decided by the API handler's `tcp` surface: only /api/v1/research* and GET /v1/health.
 */
import { createServer, type RequestListener, type Server } from 'node:http';
import { answerAndClose, HEADERS_TIMEOUT_MS, installClientErrorEnvelope, MAX_HEADER_BYTES, REQUEST_TIMEOUT_MS } from './request-guard.js';
import { TcpAdmission } from './tcp-admission.js';
import type { AddressInfo, Socket } from 'node:net';
import { FusionError } from '../errors.js';
import { isLoopbackAddress, parseAddressLiteral } from '../contracts/address-class.js';

export interface ListenAddress {
  host: string;
  port: number;
}

/** `HOST:PORT`, `[V6]:PORT` or `localhost:PORT`; port 0 picks a free port. */
export function parseListenAddress(text: string): ListenAddress {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text.trim());
  const host = m?.[1] ?? m?.[2];
  const port = Number(m?.[3]);
  if (!m || host === undefined || !Number.isInteger(port) || port > 65535) {
    throw new FusionError('invalid_config', `--listen must be HOST:PORT (e.g. 127.0.0.1:8787 or [::1]:8787), got ${JSON.stringify(text)}`, { details: { field: 'listen' } });
  }
  if (host !== 'localhost' && parseAddressLiteral(host) === undefined) {
    throw new FusionError('invalid_config', `--listen needs an IP address or localhost, got ${JSON.stringify(host)}`, { details: { field: 'listen' } });
  }
  return { host, port };
}

export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  // The listen parser has taken off any brackets; a bracketed host here is not one it made.
  return !host.startsWith('[') && isLoopbackAddress(host);
}

export function assertListenAllowed(address: ListenAddress, listenPublic: boolean): void {
  if (isLoopbackHost(address.host) || listenPublic) return;
  throw new FusionError(
    'invalid_config',
    `refusing to listen on ${address.host}: the research API listener speaks plain HTTP (no TLS), so API keys and results ` +
      'would cross the network in clear text. Listen on a loopback address (e.g. 127.0.0.1), or put a TLS proxy in front and add --listen-public.',
    { details: { field: 'listen' } },
  );
}

/**
 * Connection bounds of the TCP listener. Anyone who can reach the port can open connections
 * before any key is checked; without bounds idle or half-sent requests were kept forever, and
 * enough of them exhaust the daemon's file descriptors (its Unix socket, database and fetches
 * included), or, under a plain connection cap, lock every other client out. Headers must arrive
 * within HEADERS_TIMEOUT_MS and the whole request (not the reply: a direct run may take its full
 * duration) within REQUEST_TIMEOUT_MS, the same deadlines as the Unix socket; a connection that
 * misses one is answered 408 and destroyed (not half-closed: a peer that never closes its side
 * would keep the slot). Which connections are kept is src/api/tcp-admission.ts: at most
 * TCP_MAX_CONNECTIONS, of which TCP_RESERVED_FOR_AUTHENTICATED are kept for connections that
 * presented a valid key, at most TCP_MAX_CONNECTIONS_PER_ADDRESS anonymous ones per peer (IPv6
 * per /64), idle ones evicted first; an idle keep-alive connection is closed after
 * TCP_KEEP_ALIVE_IDLE_MS.
 */
export const TCP_HEADERS_TIMEOUT_MS = HEADERS_TIMEOUT_MS;
export const TCP_REQUEST_TIMEOUT_MS = REQUEST_TIMEOUT_MS;
export const TCP_MAX_CONNECTIONS = 256;
export const TCP_MAX_CONNECTIONS_PER_ADDRESS = 32;
export const TCP_RESERVED_FOR_AUTHENTICATED = 64;
export const TCP_KEEP_ALIVE_IDLE_MS = 5_000;
/** How long a connection admitted into the keyholders' reserve may take to send its (authenticated) request. */
export const TCP_PROBATION_MS = 2_000;
/** A connection is evicted for a newcomer only after this long without a request in progress. */
export const TCP_EVICT_GRACE_MS = 1_000;

export interface TcpListenLimits {
  headersTimeoutMs?: number;
  requestTimeoutMs?: number;
  maxConnections?: number;
  maxPerAddress?: number;
  reservedForAuthenticated?: number;
  keepAliveIdleMs?: number;
  probationMs?: number;
  evictGraceMs?: number;
}

export async function listenOnTcp(address: ListenAddress, handler: RequestListener, limits: TcpListenLimits = {}): Promise<{ server: Server; port: number; host: string }> {
  const headersTimeout = limits.headersTimeoutMs ?? TCP_HEADERS_TIMEOUT_MS;
  const requestTimeout = Math.max(headersTimeout, limits.requestTimeoutMs ?? TCP_REQUEST_TIMEOUT_MS);
  const maxConnections = limits.maxConnections ?? TCP_MAX_CONNECTIONS;
  const admission = new TcpAdmission({
    maxConnections,
    maxPerAddress: limits.maxPerAddress ?? TCP_MAX_CONNECTIONS_PER_ADDRESS,
    reservedForAuthenticated: Math.min(maxConnections - 1, limits.reservedForAuthenticated ?? TCP_RESERVED_FOR_AUTHENTICATED),
    probationMs: limits.probationMs ?? TCP_PROBATION_MS,
    evictGraceMs: limits.evictGraceMs ?? TCP_EVICT_GRACE_MS,
  });
  // A connection refused at accept has had its answer; whatever it still sends reaches no route.
  const refused = new WeakSet<Socket>();
  // Node checks these timers every connectionsCheckingInterval (default 30 s): check often enough.
  const server = createServer({ maxHeaderSize: MAX_HEADER_BYTES, headersTimeout, requestTimeout, connectionsCheckingInterval: Math.min(1_000, headersTimeout) }, (req, res) => {
    if (refused.has(req.socket)) {
      req.socket.destroy();
      return;
    }
    admission.onRequest(req, res);
    handler(req, res);
  });
  // Node-level refusals (bad request line, headers too large, timeouts) answer the JSON envelope too.
  installClientErrorEnvelope(server);
  server.on('connection', (socket: Socket) => {
    const decision = admission.admit(socket);
    if (decision.admitted) return;
    refused.add(socket);
    const why = decision.reason === 'address' ? `this address already holds ${decision.limit} open connections` : `the listener holds its maximum of ${decision.limit} open connections`;
    answerAndClose(socket, new FusionError('busy', `${why}; close idle connections and retry`, { details: { scope: 'connections', limit: decision.limit, retryAfterSeconds: 1 } }));
  });
  server.keepAliveTimeout = limits.keepAliveIdleMs ?? TCP_KEEP_ALIVE_IDLE_MS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new FusionError('invalid_config', `cannot listen on ${address.host}:${address.port}: ${err.message}`, { cause: err })));
    server.listen(address.port, address.host, () => resolve());
  });
  const bound = server.address() as AddressInfo;
  return { server, port: bound.port, host: address.host };
}
