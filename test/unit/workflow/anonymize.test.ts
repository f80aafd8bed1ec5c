import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { anonymize, letterOfSlot, randomIndex } from '../../../src/workflow/anonymize.js';

function sequence(...values: number[]): () => Buffer {
  let i = 0;
  return () => {
    const v = values[i];
    i += 1;
    if (v === undefined) throw new Error('random source exhausted');
    const b = Buffer.alloc(4);
    b.writeUInt32BE(v >>> 0);
    return b;
  };
}

describe('randomIndex (docs/behaviour.md#b5)', () => {
  it('reads 4 bytes big-endian and returns v % limit', () => {
    expect(randomIndex(3, () => Buffer.from([0, 0, 0, 0]))).toBe(0);
    expect(randomIndex(3, () => Buffer.from([0, 0, 0, 5]))).toBe(2);
    expect(randomIndex(3, () => Buffer.from([0, 0, 1, 0]))).toBe(256 % 3);
    expect(randomIndex(7, () => Buffer.from([0x12, 0x34, 0x56, 0x78]))).toBe(0x12345678 % 7);
    expect(randomIndex(2, () => Buffer.from([0xff, 0xff, 0xff, 0xff]))).toBe(1);
  });

  it('rejects v ≥ 2^32 − (2^32 mod limit) and draws again', () => {
    // limit 3: 2^32 mod 3 = 1, so 0xFFFFFFFF is the one rejected value.
    let calls = 0;
    const source = sequence(0xffffffff, 0xffffffff, 4);
    const wrapped = (): Buffer => {
      calls += 1;
      return source();
    };
    expect(randomIndex(3, wrapped)).toBe(1);
    expect(calls).toBe(3);
    // 0xFFFFFFFE is below the threshold and kept.
    expect(randomIndex(3, sequence(0xfffffffe))).toBe(0xfffffffe % 3);
    // limit 5: 2^32 mod 5 = 1 as well; limit 6: 2^32 mod 6 = 4 → 0xFFFFFFFC..FF rejected.
    expect(randomIndex(6, sequence(0xfffffffc, 0xffffffff, 0xfffffffb))).toBe(0xfffffffb % 6);
  });

  it('refuses a bad limit or a short buffer', () => {
    expect(() => randomIndex(0, () => Buffer.alloc(4))).toThrow(RangeError);
    expect(() => randomIndex(1.5, () => Buffer.alloc(4))).toThrow(RangeError);
    expect(() => randomIndex(3, () => Buffer.alloc(3))).toThrow(RangeError);
  });
});

describe('anonymize (docs/behaviour.md#b5)', () => {
  it('vector: bytes always 00 00 00 00 → {A:2,B:3,C:1}', () => {
    expect(anonymize(() => Buffer.from([0, 0, 0, 0]))).toEqual({ A: 2, B: 3, C: 1 });
  });

  it('draws randomIndex(3) then randomIndex(2)', () => {
    // i=2, j=2 (no swap) → [1,2,3]; i=1, j=1 (no swap) → identity.
    expect(anonymize(sequence(2, 1))).toEqual({ A: 1, B: 2, C: 3 });
    // i=2, j=1 → [1,3,2]; i=1, j=0 → [3,1,2].
    expect(anonymize(sequence(1, 0))).toEqual({ A: 3, B: 1, C: 2 });
    // A rejected draw in the first step is redrawn: 0xFFFFFFFF rejected, then 2.
    expect(anonymize(sequence(0xffffffff, 2, 1))).toEqual({ A: 1, B: 2, C: 3 });
  });

  it('always yields a permutation, and letterOfSlot inverts it', () => {
    for (let n = 0; n < 200; n += 1) {
      const map = anonymize();
      expect([map.A, map.B, map.C].sort()).toEqual([1, 2, 3]);
      expect(letterOfSlot(map, map.A)).toBe('A');
      expect(letterOfSlot(map, map.B)).toBe('B');
      expect(letterOfSlot(map, map.C)).toBe('C');
    }
  });

  it('is uniform over the six permutations with crypto randomness (loose bounds)', () => {
    const runs = 12_000;
    const counts = new Map<string, number>();
    for (let n = 0; n < runs; n += 1) {
      const m = anonymize(() => randomBytes(4));
      const key = `${m.A}${m.B}${m.C}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    expect(counts.size).toBe(6);
    // Expected 2000 each; σ ≈ 41, so ±300 is > 7σ.
    for (const count of counts.values()) {
      expect(count).toBeGreaterThan(1700);
      expect(count).toBeLessThan(2300);
    }
  });
});
