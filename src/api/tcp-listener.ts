/**
 * The opt-in TCP listener (`fusion daemon --listen HOST:PORT`) for the research API. It serves
 * plain HTTP: API keys cross it in clear text. So a non-loopback address is refused unless the
 * admin says `--listen-public` (e.g. behind a TLS-terminating proxy). Which routes it serves is
 * decided by the API handler's `tcp` surface: only /api/v1/research* and GET /v1/health.
 */
import { createServer, type RequestListener, type Server } from 'node:http';
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
  if (!ipaddr.isValid(host)) return false;
  const addr = ipaddr.process(host);
  return addr.range() === 'loopback';
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

export async function listenOnTcp(address: ListenAddress, handler: RequestListener): Promise<{ server: Server; port: number; host: string }> {
  const server = createServer(handler);
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new FusionError('invalid_config', `cannot listen on ${address.host}:${address.port}: ${err.message}`, { cause: err })));
    server.listen(address.port, address.host, () => resolve());
  });
  const bound = server.address() as AddressInfo;
  return { server, port: bound.port, host: address.host };
}
