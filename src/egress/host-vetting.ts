/**
 * Decides, per hop, the one address the guarded fetch may connect to (docs/behaviour.md#e3 "Host").
 *
 * - localhost / *.localhost / metadata names are refused by name, before anything else: no
 *   override and no DNS answer can make them fetchable.
 * - IP literals are classified here and never resolved: Node's `lookup` hook is skipped for
 *   literals, so a guard that only vetted lookups would miss `http://[::ffff:127.0.0.1]/`.
 * - A static override (admin seam) replaces DNS for one name; its address is still classified.
 * - Otherwise the resolver is consulted exactly once for this hop, raced against the deadline.
 *   Every answer must be public: one private address in the set refuses the whole set, since
 *   a client that retried down the list (or a future code change) could reach it. The first
 *   answer is pinned; the connector dials exactly that literal and re-checks the socket's peer,
 *   so a second resolution (DNS rebinding) never happens.
 * - `allowCidrs` (admin seam) ranges count as public; they are checked before the deny lists.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { FusionError } from '../errors.js';
import { classifyIp, type IpClassification } from '../contracts/address-class.js';
import { isBlockedHostname } from '../contracts/source-url.js';
import { blockCode } from './constants.js';
import type { FetchTarget } from './fetch-url.js';

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Injectable resolver; the default is `dns.promises.lookup(host, { all: true })`. */
export type Resolver = (host: string) => Promise<ResolvedAddress[]>;

export const defaultResolver: Resolver = async (host) => {
  const answers = await lookup(host, { all: true, verbatim: true });
  return answers.map(({ address, family }) => ({ address, family }));
};

export interface PinnedAddress {
  readonly address: string;
  readonly family: 4 | 6;
  /** Where the address came from. */
  readonly via: 'literal' | 'override' | 'dns';
  /** Every address the decision looked at (one unless DNS answered several). */
  readonly answers: readonly string[];
  /** Set when an `allowCidrs` entry made the address public. */
  readonly allowedBy?: string;
}

export interface VetOptions {
  resolve: Resolver;
  overrides: ReadonlyMap<string, string>;
  allowCidrs: readonly string[];
  signal: AbortSignal;
}

/** Rejects with the signal's reason as soon as it aborts; the losing promise is left to settle. */
export function raceAbort<T>(start: () => Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  let promise: Promise<T>;
  try {
    promise = Promise.resolve(start());
  } catch (err) {
    promise = Promise.reject(err as Error);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err as Error);
      },
    );
  });
}

function refusal(hop: number, message: string, details: Record<string, unknown>): FusionError {
  const text = hop === 0 ? message : `redirect ${String(hop)} blocked: ${message}`;
  return new FusionError(blockCode(hop), text, { details: hop === 0 ? details : { ...details, hop } });
}

function judged(verdict: Exclude<IpClassification, { public: true }>): Record<string, unknown> {
  return { reason: verdict.reason, range: verdict.range, ...(verdict.embeddedIpv4 === undefined ? {} : { embedded_ipv4: verdict.embeddedIpv4 }) };
}

function pin(address: string, via: PinnedAddress['via'], answers: readonly string[], verdict: IpClassification): PinnedAddress {
  const family = isIP(address) === 6 ? 6 : 4;
  const allowedBy = verdict.public ? verdict.allowedBy : undefined;
  return allowedBy === undefined ? { address, family, via, answers } : { address, family, via, answers, allowedBy };
}

/**
 * The part of the vetting that needs no DNS: a blocked name, an IP literal, an overridden name.
 * Returns the pinned address, throws the hop's typed refusal, or returns undefined when the
 * verdict needs the resolver.
 */
export function vetHostStatically(target: FetchTarget, hop: number, options: Pick<VetOptions, 'overrides' | 'allowCidrs'>): PinnedAddress | undefined {
  const { host } = target;
  if (isBlockedHostname(host)) {
    throw refusal(hop, `fetch host ${host} is blocked: localhost and cloud metadata names are never fetched`, { host, reason: 'blocked name' });
  }
  const classify = (address: string): IpClassification => classifyIp(address, { allowCidrs: options.allowCidrs });

  if (target.ipFamily !== 0) {
    const verdict = classify(host);
    if (!verdict.public) {
      throw refusal(hop, `fetch host ${host} is not a public address: ${verdict.reason} (${verdict.range})`, { host, address: host, ...judged(verdict) });
    }
    return pin(host, 'literal', [host], verdict);
  }

  const override = options.overrides.get(host);
  if (override !== undefined) {
    const verdict = classify(override);
    if (!verdict.public) {
      throw refusal(hop, `fetch host ${host} is overridden to ${override}, which is not public: ${verdict.reason} (${verdict.range})`, {
        host,
        address: override,
        via: 'override',
        ...judged(verdict),
      });
    }
    return pin(override, 'override', [override], verdict);
  }
  return undefined;
}

/** Vets one hop's host and returns the pinned address, or throws the hop's typed error. */
export async function vetHost(target: FetchTarget, hop: number, options: VetOptions): Promise<PinnedAddress> {
  const known = vetHostStatically(target, hop, options);
  if (known !== undefined) return known;
  const { host } = target;
  const classify = (address: string): IpClassification => classifyIp(address, { allowCidrs: options.allowCidrs });

  let answers: ResolvedAddress[];
  try {
    answers = await raceAbort(() => options.resolve(host), options.signal);
  } catch (err) {
    if (options.signal.aborted) throw options.signal.reason;
    const code = (err as { code?: unknown } | undefined)?.code;
    const why = typeof code === 'string' ? code : err instanceof Error ? err.message : String(err);
    throw new FusionError('dns_failure', `DNS lookup for ${host} failed: ${why}`, { cause: err, details: { host, hop } });
  }
  if (!Array.isArray(answers) || answers.length === 0) {
    throw new FusionError('dns_failure', `DNS lookup for ${host} returned no addresses`, { details: { host, hop } });
  }
  const addresses = answers.map((answer) => (typeof answer?.address === 'string' ? answer.address : String(answer?.address)));
  for (const address of addresses) {
    const verdict = classify(address);
    if (!verdict.public) {
      throw refusal(
        hop,
        `fetch host ${host} resolves to ${address}, which is not public: ${verdict.reason} (${verdict.range}); the whole answer set is refused`,
        { host, address, answers: addresses, via: 'dns', ...judged(verdict) },
      );
    }
  }
  const first = addresses[0] as string;
  return pin(first, 'dns', addresses, classify(first));
}
