import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodeHeader, encodeHeader, fileEntry, ustarSplit } from '../../../src/common/ustar.js';
import { writeBundleTar } from '../../../src/bundles/bundle-tar.js';

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

describe('the one ustar codec', () => {
  it('keeps the bundle format byte for byte: a fixed tree has the content address it had before the codec was shared', () => {
    // Recorded from the bundle writer as it stood before audit and bundles shared this codec;
    // a bundle's sha256 is its content address, so the bytes must never drift.
    const bundle = writeBundleTar([
      { type: 'dir', path: 'src' },
      { type: 'file', path: 'src/a.ts', executable: false, data: Buffer.from('x') },
      { type: 'file', path: 'run.sh', executable: true, data: Buffer.alloc(600, 1) },
      { type: 'symlink', path: 'l', target: 'src/a.ts' },
      { type: 'file', path: `src/${'é'.repeat(40)}`, executable: false, data: Buffer.alloc(0) },
    ]);
    expect(sha256(bundle)).toBe('aebfa73a52fdee70cfe80492e6493c00aff4e59fd92034a3c518f2ac637bc72b');
  });

  it('writes each numeric layout as its archives always had it', () => {
    const space = encodeHeader({ name: 'a', type: 'file', mode: 0o600, size: 1000 }, 'space');
    expect(space.toString('latin1', 100, 108)).toBe('000600 \0');
    expect(space.toString('latin1', 124, 136)).toBe('00000001750 ');
    expect(space.toString('latin1', 329, 337)).toBe('000000 \0');
    expect(space.toString('latin1', 154, 156)).toBe(' \0');
    const nul = encodeHeader({ name: 'a', type: 'file', mode: 0o644, size: 1000 }, 'nul');
    expect(nul.toString('latin1', 100, 108)).toBe('0000644\0');
    expect(nul.toString('latin1', 124, 136)).toBe('00000001750\0');
    expect(nul.toString('latin1', 329, 337)).toBe('\0'.repeat(8));
    expect(nul.toString('latin1', 154, 156)).toBe('\0 ');
    for (const h of [space, nul]) expect(decodeHeader(h)).toMatchObject({ name: 'a', typeFlag: '0', size: 1000, checksumOk: true, ustar: true });
  });

  it('splits a long path at the shortest prefix that fits, and refuses what needs a PAX header', () => {
    const long = `${'d'.repeat(120)}/${'a'.repeat(100)}`;
    expect(ustarSplit(long)).toEqual({ prefix: 'd'.repeat(120), name: 'a'.repeat(100) });
    expect(ustarSplit('a'.repeat(101))).toBeNull();
    const [h] = fileEntry(long, 0o600, Buffer.from('x'), 'space');
    expect(decodeHeader(h!).name).toBe(long);
    expect(() => encodeHeader({ name: 'a'.repeat(101), type: 'file', mode: 0, size: 0 }, 'space')).toThrow(/too long/);
  });

  it('reports a flipped byte as a checksum mismatch', () => {
    const h = encodeHeader({ name: 'a', type: 'file', mode: 0o600, size: 3 }, 'space');
    h[10] = 0x41;
    expect(decodeHeader(h).checksumOk).toBe(false);
  });
});
