/**
 * Anonymisation of the three candidates (docs/behaviour.md#b5): an unbiased Fisher–Yates shuffle of the
 * slots [1, 2, 3] onto the letters A, B, C. The random source is injected (4 bytes per draw) so
 * the fixed vector and the rejection path are testable; production passes
 * `() => crypto.randomBytes(4)` (see `cryptoRandomBytes4`).
 */
import { randomBytes } from 'node:crypto';

export type Slot = 1 | 2 | 3;
export type AnonymizationMap = { A: Slot; B: Slot; C: Slot };
export type RandomBytes4 = () => Buffer | Uint8Array;

const RANGE = 2 ** 32;

export const cryptoRandomBytes4: RandomBytes4 = () => randomBytes(4);

/**
 * Uniform integer in [0, limit). Reads 4 bytes big-endian and rejects values at or above the
 * largest multiple of `limit` below 2^32, so `v % limit` carries no modulo bias.
 */
export function randomIndex(limit: number, randomBytes4: RandomBytes4): number {
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > RANGE) throw new RangeError(`randomIndex limit must be an integer in 1..2^32, got ${limit}`);
  const threshold = RANGE - (RANGE % limit);
  for (;;) {
    const bytes = randomBytes4();
    if (bytes.length < 4) throw new RangeError('randomIndex needs 4 random bytes');
    const v = (((bytes[0] ?? 0) << 24) >>> 0) + ((bytes[1] ?? 0) << 16) + ((bytes[2] ?? 0) << 8) + (bytes[3] ?? 0);
    if (v < threshold) return v % limit;
  }
}

/**
 * Fisher–Yates over [1, 2, 3] from i = 2 down to 1 with j = randomIndex(i + 1); then
 * A = s0, B = s1, C = s2. With all-zero bytes: i=2,j=0 → [3,2,1]; i=1,j=0 → [2,3,1].
 */
export function anonymize(randomBytes4: RandomBytes4 = cryptoRandomBytes4): AnonymizationMap {
  const slots: [Slot, Slot, Slot] = [1, 2, 3];
  for (let i = 2; i >= 1; i -= 1) {
    const j = randomIndex(i + 1, randomBytes4);
    const a = slots[i] as Slot;
    slots[i] = slots[j] as Slot;
    slots[j] = a;
  }
  return { A: slots[0], B: slots[1], C: slots[2] };
}

/** The letter a slot was given (inverse of the map). */
export function letterOfSlot(map: AnonymizationMap, slot: Slot): 'A' | 'B' | 'C' {
  if (map.A === slot) return 'A';
  if (map.B === slot) return 'B';
  if (map.C === slot) return 'C';
  throw new RangeError(`slot ${slot} is not in the anonymization map`);
}
