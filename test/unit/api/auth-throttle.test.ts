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

  it('remembers a bounded number of addresses; a displaced one hands its failures to the newcomer, and the table frees as they age out', () => {
    let now = 1_000_000;
    const t = new AuthFailureThrottle({ maxFailures: 2, windowMs: 60_000, maxTracked: 100, now: () => now });
    for (let i = 0; i < 5_000; i++) t.recordFailure(`198.51.${Math.floor(i / 256)}.${i % 256}`);
    expect(t.tracked).toBe(100);
    // Every remembered address is over the limit: one not remembered would carry such failures.
    expect(refusal(() => t.check('198.51.0.0'))?.code).toBe('rate_limited');
    expect(refusal(() => t.check(`198.51.${Math.floor(4999 / 256)}.${4999 % 256}`))?.code).toBe('rate_limited');
    now += 60_000;
    expect(refusal(() => t.check('198.51.0.0'))).toBeUndefined();
  });
  // Attack: an attacker with more addresses than are remembered (127.x.y.z on loopback, the /64s
  // of one IPv6 /48) sprays failures round-robin so each address is forgotten before it reaches
  // the limit. Forgetting must not forget the failures: the total stays bounded.
  it('spreading failures over more addresses than it remembers gains nothing: the total within a window stays bounded', () => {
    const now = 1_000_000;
    const t = new AuthFailureThrottle({ maxFailures: 3, windowMs: 60_000, maxTracked: 10, now: () => now });
    let admitted = 0;
    for (let i = 0; i < 5_000; i++) {
      const address = `127.0.${Math.floor((i % 11) / 256)}.${(i % 11) + 1}`;
      if (refusal(() => t.check(address)) !== undefined) continue;
      admitted += 1;
      t.recordFailure(address);
    }
    expect(t.tracked).toBeLessThanOrEqual(10);
    // 10 remembered addresses × 3, plus at most one limit's worth carried by the newcomers.
    expect(admitted).toBeLessThanOrEqual(10 * 3 + 3);
  });

  it('a legitimate address new to the listener is admitted while the remembered ones are below the limit', () => {
    const t = new AuthFailureThrottle({ maxFailures: 3, windowMs: 60_000, maxTracked: 10 });
    for (let i = 0; i < 10; i++) t.recordFailure(`198.51.100.${i}`);
    expect(refusal(() => t.check('203.0.113.1'))).toBeUndefined();
  });

  // Attack: authentication awaits the database, so concurrent attempts from one address all
  // passed check() before the first of them was recorded as failed: a burst of N connections
  // got N guesses, not 20.
  it('concurrent attempts count while they are being authenticated: a burst of bad keys gets no more than the limit', async () => {
    const t = new AuthFailureThrottle({ maxFailures: 3, windowMs: 60_000 });
    const outcomes = await Promise.all(Array.from({ length: 50 }, async () => {
      try {
        const settle = await t.begin('192.0.2.9');
        await new Promise((r) => setTimeout(r, 5)); // the key lookup
        settle(true);
        return 'guessed';
      } catch (err) {
        expect((err as FusionError).code).toBe('rate_limited');
        return 'refused';
      }
    }));
    expect(outcomes.filter((o) => o === 'guessed')).toHaveLength(3);
    expect(outcomes.filter((o) => o === 'refused')).toHaveLength(47);
    await expect(t.begin('192.0.2.9')).rejects.toMatchObject({ code: 'rate_limited' });
  });

  // A legitimate client's parallel requests with a valid key: they wait their turn, none is refused.
  it('a burst with a valid key is never refused: attempts beyond the limit wait for those in flight', async () => {
    const t = new AuthFailureThrottle({ maxFailures: 3, windowMs: 60_000 });
    const outcomes = await Promise.all(Array.from({ length: 50 }, async () => {
      const settle = await t.begin('192.0.2.11');
      await new Promise((r) => setTimeout(r, 2)); // the key lookup
      settle(false);
      return 'served';
    }));
    expect(outcomes.filter((o) => o === 'served')).toHaveLength(50);
    expect(t.tracked).toBe(0);
  });

  it('a settled successful attempt leaves nothing behind (a valid key is never slowed by its own past)', async () => {
    const t = new AuthFailureThrottle({ maxFailures: 2, windowMs: 60_000 });
    for (let i = 0; i < 100; i++) {
      const settle = await t.begin('192.0.2.10');
      settle(false);
      settle(false); // settling twice counts once
    }
    expect(t.tracked).toBe(0);
  });
});
