/**
 * The repository bundle packer and its strict reader (docs/security.md#repository-bundles):
 * deterministic bytes, excludes, the cap, symlinks that leave the tree, special files.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packTree } from '../../../src/bundles/pack.js';
import { readBundleTar } from '../../../src/bundles/bundle-tar.js';
import { DEFAULT_REPO_EXCLUDES } from '../../../src/bundles/excludes.js';
import { FusionError } from '../../../src/errors.js';

const roots: string[] = [];
afterAll(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'fusion-pack-'));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

const opts = { exclude: DEFAULT_REPO_EXCLUDES, maxBytes: 1024 * 1024 };
const LIMITS = { maxBytes: 1024 * 1024, maxEntries: 1000 };
const paths = (data: Buffer): string[] => readBundleTar(data, LIMITS).map((e) => `${e.type}:${e.path}`);

describe('packTree', () => {
  it('gives the same digest for the same tree, whatever its mtimes, owners and creation order', async () => {
    const a = tree({ 'src/b.ts': 'b', 'src/a.ts': 'a', 'README.md': 'r' });
    const b = tree({ 'README.md': 'r', 'src/a.ts': 'a', 'src/b.ts': 'b' });
    utimesSync(join(b, 'src/a.ts'), 1000, 1000);
    chmodSync(join(b, 'README.md'), 0o604);
    execFileSync('chown', ['65534:65534', join(b, 'src/b.ts')]);
    const [pa, pb] = [await packTree(a, opts), await packTree(b, opts)];
    expect(pa.digest).toBe(pb.digest);
    expect(pa.data.equals(pb.data)).toBe(true);
    expect(paths(pa.data)).toEqual(['file:README.md', 'dir:src', 'file:src/a.ts', 'file:src/b.ts']);
    writeFileSync(join(b, 'src/a.ts'), 'A');
    expect((await packTree(b, opts)).digest).not.toBe(pa.digest);
  });

  it('keeps the exec bit only, as 0755, and normalises every other mode', async () => {
    const root = tree({ 'run.sh': '#!/bin/sh\n', 'data.txt': 'x' });
    chmodSync(join(root, 'run.sh'), 0o744);
    chmodSync(join(root, 'data.txt'), 0o666);
    const entries = readBundleTar((await packTree(root, opts)).data, LIMITS);
    expect(entries.map((e) => e.type === 'file' && e.executable)).toEqual([false, true]);
  });

  it('leaves .git/ out by default, and applies .gitignore-style excludes (anchors, **, negation, dir-only)', async () => {
    const root = tree({
      '.git/HEAD': 'ref', 'node_modules/x/index.js': 'x', 'src/app.ts': 'a', 'src/app.log': 'l', 'build/out.js': 'o',
      'docs/build': 'a file named build', 'keep.log': 'k', 'deep/a/b/c.tmp': 't',
    });
    expect(paths((await packTree(root, opts)).data)).not.toContain('dir:.git');
    const packed = await packTree(root, { ...opts, exclude: ['node_modules/', '*.log', '!keep.log', '/build/', '**/*.tmp', '.git'] });
    expect(paths(packed.data)).toEqual(['dir:deep', 'dir:deep/a', 'dir:deep/a/b', 'dir:docs', 'file:docs/build', 'file:keep.log', 'dir:src', 'file:src/app.ts']);
    // An empty list replaces the default: everything is packed.
    expect(paths((await packTree(root, { ...opts, exclude: [] })).data)).toContain('file:.git/HEAD');
  });

  it('refuses a tree over the cap with invalid_input naming the field and the ways out', async () => {
    const root = tree({ 'small.txt': 'x', 'big.bin': 'y'.repeat(300 * 1024) });
    const err = await packTree(root, { exclude: [], maxBytes: 200 * 1024 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FusionError);
    expect((err as FusionError).code).toBe('invalid_input');
    expect((err as FusionError).details).toMatchObject({ field: 'repo', reason: 'repo_too_large' });
    expect((err as FusionError).message).toMatch(/repoExclude.*FUSION_BUNDLE_MAX_MB/u);
    expect((await packTree(root, { exclude: ['big.bin'], maxBytes: 200 * 1024 })).entries).toBe(1);
  });

  it('keeps in-repo relative symlinks and skips those that leave the tree (absolute, .., through another link)', async () => {
    const root = tree({ 'src/a.ts': 'a' });
    symlinkSync('src/a.ts', join(root, 'inside'));
    symlinkSync('../src', join(root, 'src', 'loop'));
    symlinkSync('/etc/passwd', join(root, 'absolute'));
    symlinkSync('../../etc/passwd', join(root, 'src', 'climb'));
    symlinkSync('.', join(root, 'dot'));
    symlinkSync('dot/../outside', join(root, 'sneaky'));
    const packed = await packTree(root, opts);
    expect(paths(packed.data)).toEqual(['symlink:dot', 'symlink:inside', 'dir:src', 'file:src/a.ts', 'symlink:src/loop']);
    expect(packed.skipped.escapingLinks).toBe(3);
  });

  it('leaves out what a sandbox uid could not read at the path: files without o+r, directories without o+rx', async () => {
    const root = tree({ 'open.txt': 'o', '.env': 'secret', 'private/key': 'k' });
    chmodSync(join(root, '.env'), 0o640);
    chmodSync(join(root, 'private'), 0o750);
    const packed = await packTree(root, opts);
    expect(paths(packed.data)).toEqual(['file:open.txt']);
    expect(packed.skipped.unreadable).toBe(2);
  });

  it('skips FIFOs and sockets (never opened)', async () => {
    const root = tree({ 'a.txt': 'a' });
    execFileSync('mkfifo', [join(root, 'pipe')]);
    const packed = await packTree(root, opts);
    expect(paths(packed.data)).toEqual(['file:a.txt']);
    expect(packed.skipped.special).toBe(1);
  });
});
