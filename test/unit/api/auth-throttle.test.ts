import { describe, expect, it } from 'vitest';
import { AuthFailureThrottle, throttleKey } from '../../../src/api/auth-throttle.js';
import type { FusionError } from '../../../src/errors.js';

const refusal = (fn: () => void): FusionError | undefined => {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err as FusionError;
  }
};

describe('TCP failed-authentication throttle', () => {
  it('refuses an address after K failures in the window, says when to retry, and lets it in once the oldest failure leaves the window', () => {
    let now = 1_000_000;
    const t = new AuthFailureThrottle({ maxFailures: 3, windowMs: 10_000, now: () => now });
    for (let i = 0; i < 3; i++) {
      expect(refusal(() => t.check('203.0.113.7'))).toBeUndefined();
      t.recordFailure('203.0.113.7');
      now += 1_000;
    }
    const err = refusal(() => t.check('203.0.113.7'))!;
    expect(err.code).toBe('rate_limited');
    expect(err.httpStatus).toBe(429);
    expect(err.retryable).toBe(true);
    expect(err.details).toEqual({ scope: 'auth', limit: 3, windowSeconds: 10, retryAfterSeconds: 7 });
    // Another address is not affected.
    expect(refusal(() => t.check('203.0.113.8'))).toBeUndefined();
    now += 7_000; // the first failure is now 10 s old
    expect(refusal(() => t.check('203.0.113.7'))).toBeUndefined();
  });

  it('counts IPv4-mapped IPv6 as IPv4 and IPv6 per /64', () => {
    expect(throttleKey('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(throttleKey('2001:db8:1:2:aaaa::1')).toBe(throttleKey('2001:db8:1:2:bbbb::2'));
    expect(throttleKey('2001:db8:1:2::1')).not.toBe(throttleKey('2001:db8:1:3::1'));
    expect(throttleKey('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    const t = new AuthFailureThrottle({ maxFailures: 1, windowMs: 60_000 });
    t.recordFailure('::ffff:192.0.2.1');
    expect(refusal(() => t.check('192.0.2.1'))?.code).toBe('rate_limited');
  });

  it('remembers a bounded number of addresses (the least recently failing forgotten first)', () => {
    const t = new AuthFailureThrottle({ maxFailures: 1, windowMs: 60_000, maxTracked: 100 });
    for (let i = 0; i < 5_000; i++) t.recordFailure(`198.51.${Math.floor(i / 256)}.${i % 256}`);
    expect(t.tracked).toBe(100);
    expect(refusal(() => t.check('198.51.0.0'))).toBeUndefined();
    expect(refusal(() => t.check(`198.51.${Math.floor(4999 / 256)}.${4999 % 256}`))?.code).toBe('rate_limited');
  });
});
