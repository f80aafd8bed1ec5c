/**
 * The opt-in TCP listener (`fusion daemon --listen HOST:PORT`) for the research API. It serves
 * plain HTTP: API keys cross it in clear text. So a non-loopback address is refused unless the
 * admin says `--listen-public` (e.g. behind a TLS-terminating proxy). Which routes it serves is
 * decided by the API handler's `tcp` surface: only /api/v1/research* and GET /v1/health.
 */
import { createServer, type RequestListener, type Server } from 'node:http';
import { installClientErrorEnvelope, MAX_HEADER_BYTES } from './request-guard.js';
import type { AddressInfo } from 'node:net';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { FusionError } from '../errors.js';

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
  if (host !== 'localhost' && isIP(host) === 0) {
    throw new FusionError('invalid_config', `--listen needs an IP address or localhost, got ${JSON.stringify(host)}`, { details: { field: 'listen' } });
  }
  return { host, port };
}

export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  const family = isIP(host);
  if (family === 0) return false;
  // ipaddr.js reads the IPv4-compatible `::127.0.0.1` (= ::7f00:1, not loopback) as IPv4-mapped:
  // classify the WHATWG serialisation of an IPv6 address instead (a zone id is dropped first).
  const text = family === 6 ? new URL(`http://[${host.split('%')[0]!}]/`).hostname.slice(1, -1) : host;
  if (!ipaddr.isValid(text)) return false;
  return ipaddr.process(text).range() === 'loopback';
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
 * included). Headers must arrive within TCP_HEADERS_TIMEOUT_MS and the whole request (not the
 * reply: a direct run may take its full duration) within TCP_REQUEST_TIMEOUT_MS; at most
 * TCP_MAX_CONNECTIONS are open at once (more are closed on accept).
 */
export const TCP_HEADERS_TIMEOUT_MS = 10_000;
export const TCP_REQUEST_TIMEOUT_MS = 30_000;
export const TCP_MAX_CONNECTIONS = 256;

export interface TcpListenLimits {
  headersTimeoutMs?: number;
  requestTimeoutMs?: number;
  maxConnections?: number;
}

export async function listenOnTcp(address: ListenAddress, handler: RequestListener, limits: TcpListenLimits = {}): Promise<{ server: Server; port: number; host: string }> {
  const headersTimeout = limits.headersTimeoutMs ?? TCP_HEADERS_TIMEOUT_MS;
  const requestTimeout = Math.max(headersTimeout, limits.requestTimeoutMs ?? TCP_REQUEST_TIMEOUT_MS);
  // Node checks these timers every connectionsCheckingInterval (default 30 s): check often enough.
  const server = createServer({ maxHeaderSize: MAX_HEADER_BYTES, headersTimeout, requestTimeout, connectionsCheckingInterval: Math.min(1_000, headersTimeout) }, handler);
  // Node-level refusals (bad request line, headers too large, timeouts) answer the JSON envelope too.
  installClientErrorEnvelope(server);
  server.maxConnections = limits.maxConnections ?? TCP_MAX_CONNECTIONS;
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new FusionError('invalid_config', `cannot listen on ${address.host}:${address.port}: ${err.message}`, { cause: err })));
    server.listen(address.port, address.host, () => resolve());
  });
  const bound = server.address() as AddressInfo;
  return { server, port: bound.port, host: address.host };
}
