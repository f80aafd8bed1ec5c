/**
 * The undici `connect` function of one hop: it dials exactly the vetted, pinned address (a
 * literal, so no DNS lookup can happen underneath), checks the socket's peer before a single
 * byte is written, and only then starts TLS with SNI and certificate checks for the NAME.
 *
 * Why a hand-written connector rather than undici's `connect: { lookup }`: Node skips the lookup
 * hook for IP literals and calls it with `all:true` under autoSelectFamily; dialing the pinned
 * literal ourselves leaves no path where a second resolution or a different address is used.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { buildConnector } from 'undici';
import { FusionError } from '../errors.js';
import { canonicalAddress } from '../contracts/address-class.js';
import type { PinnedAddress } from './host-vetting.js';

export interface PinnedConnectorOptions {
  pinned: PinnedAddress;
  /** The URL's host name; undefined for IP-literal hosts (SNI must not carry an address). */
  servername: string | undefined;
  /** Aborting destroys a connection still being set up. */
  signal: AbortSignal;
}

/** Why the connected peer is not the pinned address, or undefined when it is. */
export function remoteAddressProblem(remoteAddress: string | undefined, pinnedAddress: string): string | undefined {
  if (remoteAddress === undefined || remoteAddress === '') return 'the socket has no remote address';
  const remote = canonicalAddress(remoteAddress);
  if (remote === undefined || remote !== canonicalAddress(pinnedAddress)) {
    return `the socket is connected to ${remoteAddress}, not the vetted address ${pinnedAddress}`;
  }
  return undefined;
}

/** Refuses any DNS lookup: the connector only ever dials literals, so a lookup is a bug. */
const refuseLookup: net.LookupFunction = (hostname, _options, callback) => {
  callback(new Error(`unexpected DNS lookup of ${hostname} inside the pinned connector`), '', 4);
};

export function createPinnedConnector(options: PinnedConnectorOptions): buildConnector.connector {
  const { pinned, servername, signal } = options;
  return (connectOptions, callback) => {
    let settled = false;
    let current: net.Socket | undefined;
    const settle = (err: Error | null, socket: net.Socket | null): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      if (err !== null || socket === null) callback(err ?? new Error('connection failed'), null);
      else callback(null, socket);
    };
    const onAbort = (): void => {
      current?.destroy();
      settle(signal.reason instanceof Error ? signal.reason : new Error('aborted'), null);
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });

    const https = connectOptions.protocol === 'https:';
    const port = Number(connectOptions.port) || (https ? 443 : 80);
    const raw = net.connect({ host: pinned.address, port, family: pinned.family, lookup: refuseLookup, noDelay: true });
    current = raw;
    raw.once('error', (err) => settle(err, null));
    raw.once('connect', () => {
      const problem = remoteAddressProblem(raw.remoteAddress, pinned.address);
      if (problem !== undefined) {
        raw.destroy();
        settle(new FusionError('blocked_address', `connection refused: ${problem}`, {
          details: { address: pinned.address, remote_address: raw.remoteAddress ?? null },
        }), null);
        return;
      }
      if (!https) {
        settle(null, raw);
        return;
      }
      // Certificate identity is checked against `servername || host`: the name for DNS hosts,
      // the literal for IP hosts. SNI is only sent for names.
      const secure = tls.connect({
        socket: raw,
        host: servername ?? pinned.address,
        ...(servername === undefined ? {} : { servername }),
        ALPNProtocols: ['http/1.1'],
        rejectUnauthorized: true,
      });
      current = secure;
      secure.once('error', (err) => {
        secure.destroy();
        settle(err, null);
      });
      secure.once('secureConnect', () => settle(null, secure));
    });
  };
}
