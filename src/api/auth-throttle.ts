/**
 * Failed-authentication limit of the TCP listener (the research API's only network surface).
 *
 * Keys are 256-bit secrets compared in constant time (src/research/api-keys.ts), so guessing
 * one is hopeless anyway; what this bounds is the cost of trying: each attempt is a database
 * read and a log line, and a flood of bad keys from one address should not be served at the
 * speed it is sent. After `maxFailures` failed attempts (401) from one address within
 * `windowMs`, every research request from that address is refused with `rate_limited` (429,
 * Retry-After) until the oldest failure leaves the window — a valid key included, or the limit
 * would not bind an attacker who holds one key and guesses others. Successful requests add
 * nothing, so a caller with a valid key is never slowed.
 *
 * The address is the TCP peer: behind a proxy (--listen-public) every client shares the proxy's
 * address, and one client's failures lock out the rest; such a proxy should limit per client.
 * IPv6 peers are counted per /64 (one host usually owns a whole /64); IPv4-mapped IPv6 as IPv4.
 *
 * Two ways around a per-address count are closed: concurrent attempts count while they are
 * being authenticated, and those that could take the address past its limit wait for the ones
 * in flight (a burst of connections gets the limit, not one guess each), and an
 * address displaced from the full table hands its failures to the newcomer (spraying more
 * addresses than are remembered gains nothing; once the least recently failing remembered
 * address is itself over the limit, addresses not remembered are refused too).
 */
import { FusionError } from '../errors.js';
import { addressUnit } from '../contracts/address-class.js';

export interface AuthThrottleOptions {
  /** Failed attempts allowed per address within the window (the next request is refused). */
  maxFailures: number;
  windowMs: number;
  /**
   * Addresses remembered at most: memory stays bounded under a spread attack. A new address in a
   * full table displaces the least recently failing one and carries its failures (recordFailure).
   */
  maxTracked: number;
  now?: () => number;
}

export const AUTH_FAILURE_LIMIT = 20;
export const AUTH_FAILURE_WINDOW_MS = 60_000;
export const AUTH_MAX_TRACKED = 10_000;

/** The unit an address is counted in: IPv4 as is, IPv6 by its /64, IPv4-mapped IPv6 as IPv4. */
export function throttleKey(address: string | undefined): string {
  const text = address ?? '';
  return addressUnit(text) ?? text.split('%')[0]!;
}

export class AuthFailureThrottle {
  private readonly failures = new Map<string, number[]>();
  /** Attempts being authenticated now, per address (see begin). */
  private readonly pending = new Map<string, number>();
  private readonly options: Required<AuthThrottleOptions>;

  constructor(options: Partial<AuthThrottleOptions> = {}) {
    this.options = {
      maxFailures: options.maxFailures ?? AUTH_FAILURE_LIMIT,
      windowMs: options.windowMs ?? AUTH_FAILURE_WINDOW_MS,
      maxTracked: options.maxTracked ?? AUTH_MAX_TRACKED,
      now: options.now ?? Date.now,
    };
  }

  /** Failures of `key` still inside the window (expired ones are dropped). */
  private recent(key: string, now: number): number[] {
    const list = this.failures.get(key);
    if (list === undefined) return [];
    const kept = list.filter((t) => now - t < this.options.windowMs);
    if (kept.length === 0) this.failures.delete(key);
    else if (kept.length !== list.length) this.failures.set(key, kept);
    return kept;
  }

  /**
   * The failures that count against `key`: its own, or, for an address not remembered while the
   * table is full, those of the entry it would displace (it carries them, see recordFailure).
   */
  private charged(key: string, now: number): number[] {
    if (this.failures.has(key) || this.failures.size < this.options.maxTracked) return this.recent(key, now);
    const oldest = this.failures.keys().next().value as string;
    return this.recent(oldest, now);
  }

  private refusal(recent: readonly number[], now: number): FusionError {
    const retryAfterSeconds = recent.length === 0 ? 1 : Math.max(1, Math.ceil((recent[0]! + this.options.windowMs - now) / 1000));
    return new FusionError(
      'rate_limited',
      `too many failed API-key attempts from this address (${recent.length} in ${Math.round(this.options.windowMs / 1000)} s); retry in ${retryAfterSeconds} s with a valid workspace key`,
      { details: { scope: 'auth', limit: this.options.maxFailures, windowSeconds: Math.round(this.options.windowMs / 1000), retryAfterSeconds } },
    );
  }

  /** Throws `rate_limited` while `address` is over its limit; called before the key is looked at. */
  check(address: string | undefined): void {
    const now = this.options.now();
    const key = throttleKey(address);
    const recent = this.charged(key, now);
    if (recent.length + (this.pending.get(key) ?? 0) >= this.options.maxFailures) throw this.refusal(recent, now);
  }

  /** Attempts waiting for an in-flight one of their address to settle (see begin). */
  private readonly waiting = new Map<string, Array<() => void>>();

  /**
   * Admits one authentication attempt (or throws `rate_limited`, like check) and counts it against
   * the address until it settles: authentication awaits the database, so without this a burst of
   * concurrent attempts would all pass the check before the first of them failed. An attempt that
   * would take the address to its limit if every one in flight failed waits for one of them to
   * settle, then looks again: a burst of bad keys gets the limit and then 429s; a burst with a
   * valid key only waits its turn (its attempts succeed, nothing is counted). Call the returned
   * function with whether the key was refused (401); later calls do nothing.
   */
  async begin(address: string | undefined): Promise<(failed: boolean) => void> {
    const key = throttleKey(address);
    for (;;) {
      const now = this.options.now();
      const recent = this.charged(key, now);
      if (recent.length >= this.options.maxFailures) throw this.refusal(recent, now);
      if (recent.length + (this.pending.get(key) ?? 0) < this.options.maxFailures) break;
      await new Promise<void>((wake) => this.waiting.set(key, [...(this.waiting.get(key) ?? []), wake]));
    }
    this.pending.set(key, (this.pending.get(key) ?? 0) + 1);
    let settled = false;
    return (failed: boolean): void => {
      if (settled) return;
      settled = true;
      const left = (this.pending.get(key) ?? 1) - 1;
      if (left > 0) this.pending.set(key, left);
      else this.pending.delete(key);
      if (failed) this.recordFailure(address);
      // Everyone waiting on this address looks again (admitted, refused, or waits on).
      const woken = this.waiting.get(key) ?? [];
      this.waiting.delete(key);
      for (const wake of woken) wake();
    };
  }

  recordFailure(address: string | undefined): void {
    const now = this.options.now();
    const key = throttleKey(address);
    // A new address in a full table displaces the least recently failing one and carries its
    // failures: forgetting an address must not forget what it did, or an attacker with more
    // addresses than are remembered would spray them round-robin and never reach any limit.
    const recent = this.charged(key, now);
    if (!this.failures.has(key) && this.failures.size >= this.options.maxTracked) this.failures.delete(this.failures.keys().next().value as string);
    // Re-inserted so the map's order is least recently failed first: that one is displaced first.
    this.failures.delete(key);
    this.failures.set(key, [...recent.slice(Math.max(0, recent.length - (this.options.maxFailures - 1))), now]);
  }

  /** Addresses currently remembered (tests, metrics). */
  get tracked(): number {
    return this.failures.size;
  }
}
