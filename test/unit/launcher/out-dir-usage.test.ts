/**
 * The /out caps count the whole tree (src/launcher/out-dir-usage.ts): files and bytes in nested
 * directories count like top-level ones.
 */
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { outDirOverflow } from '../../../src/launcher/out-dir-usage.js';

function outDir(): string {
  return mkdtempSync(join(tmpdir(), 'fusion-outdir-'));
}

describe('outDirOverflow', () => {
  it('is null within the caps', async () => {
    const dir = outDir();
    writeFileSync(join(dir, 'a'), 'x'.repeat(10));
    expect(await outDirOverflow(dir, { maxFiles: 1, maxBytes: 10 })).toBeNull();
  });

  it('counts files in nested directories (a directory is an entry too)', async () => {
    const dir = outDir();
    mkdirSync(join(dir, 'a', 'b'), { recursive: true });
    for (let i = 0; i < 3; i++) writeFileSync(join(dir, 'a', 'b', `f${i}`), '');
    // a, a/b, and three files: 5 entries
    expect(await outDirOverflow(dir, { maxFiles: 5, maxBytes: 1e9 })).toBeNull();
    expect(await outDirOverflow(dir, { maxFiles: 4, maxBytes: 1e9 })).toBe('more than 4 files in /out');
  });

  it('counts bytes in nested directories', async () => {
    const dir = outDir();
    mkdirSync(join(dir, 'deep', 'er'), { recursive: true });
    writeFileSync(join(dir, 'deep', 'er', 'big'), Buffer.alloc(200_000));
    expect(await outDirOverflow(dir, { maxFiles: 100, maxBytes: 100_000 })).toBe('more than 100000 bytes in /out');
  });

  it('never follows a link out of /out', async () => {
    const dir = outDir();
    const elsewhere = outDir();
    writeFileSync(join(elsewhere, 'big'), Buffer.alloc(200_000));
    symlinkSync(elsewhere, join(dir, 'link'));
    expect(await outDirOverflow(dir, { maxFiles: 100, maxBytes: 100_000 })).toBeNull();
  });

  it('a missing directory is not an overflow (the attempt is over)', async () => {
    expect(await outDirOverflow(join(outDir(), 'gone'))).toBeNull();
  });
});
