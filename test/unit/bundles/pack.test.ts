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
    // Regular files are counted apart from directories: none means the task reads no file.
    expect([pa.entries, pa.files]).toEqual([4, 3]);
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
    // An empty list replaces the default: .git/ and the secrets rule's files are packed.
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
    expect(packed.skipped.counts.escapingLinks).toBe(3);
    expect(packed.skipped.paths.escapingLinks).toEqual(['absolute', 'sneaky', 'src/climb']);
  });

  it('packs what the caller can open, whatever "others" may do (a root caller reads all): a 0600 file and a 0700 directory are packed', async () => {
    const root = tree({ 'open.txt': 'o', 'mine.txt': 'm', 'private/key.txt': 'k' });
    chmodSync(join(root, 'mine.txt'), 0o600);
    chmodSync(join(root, 'private'), 0o700);
    const packed = await packTree(root, opts);
    expect(paths(packed.data)).toEqual(['file:mine.txt', 'file:open.txt', 'dir:private', 'file:private/key.txt']);
    expect(packed.skipped.counts.unreadable).toBe(0);
  });

  it('leaves out the secrets rule\'s files by default, counted and named as secret (.git/ as ignored); a repoExclude list replaces the rule', async () => {
    const root = tree({
      'src/a.ts': 'a', '.env': 'TOKEN=1', '.env.local': 'x', 'certs/server.pem': 'p', 'deploy/id_ed25519': 'k', '.ssh/config': 'c', '.npmrc': 'n', '.git/HEAD': 'ref', 'env.ts': 'not a secret',
    });
    const packed = await packTree(root, opts);
    expect(paths(packed.data)).toEqual(['dir:certs', 'dir:deploy', 'file:env.ts', 'dir:src', 'file:src/a.ts']);
    expect(packed.skipped.counts).toMatchObject({ secret: 6, ignored: 1, unreadable: 0 });
    expect(packed.skipped.paths.secret).toEqual(['.env', '.env.local', '.npmrc', '.ssh/', 'certs/server.pem', 'deploy/id_ed25519']);
    const replaced = await packTree(root, { ...opts, exclude: ['.git/', '*.pem'] });
    expect(paths(replaced.data)).toContain('file:.env');
    expect(replaced.skipped.counts).toMatchObject({ secret: 1, excluded: 0 });
  });

  it('honours the checkout\'s own .gitignore files, root and nested (relative to their directory, deeper wins), and repoExclude "!x" re-includes', async () => {
    const root = tree({
      '.gitignore': 'node_modules/\ndist/\n*.log\n/build\n',
      'node_modules/x/index.js': 'x', 'dist/app.js': 'd', 'src/a.ts': 'a', 'src/debug.log': 'l', 'build/o': 'o', 'src/build/keep.txt': 'k',
      'pkg/.gitignore': 'generated/\n!important.log\n', 'pkg/generated/g.ts': 'g', 'pkg/important.log': 'i', 'pkg/other.log': 'o',
    });
    const packed = await packTree(root, opts);
    expect(paths(packed.data)).toEqual([
      'file:.gitignore', 'dir:pkg', 'file:pkg/.gitignore', 'file:pkg/important.log', 'dir:src', 'file:src/a.ts', 'dir:src/build', 'file:src/build/keep.txt',
    ]);
    expect(packed.skipped.counts.ignored).toBe(6);
    expect(packed.skipped.paths.ignored).toEqual(['build/', 'dist/', 'node_modules/', 'pkg/generated/', 'pkg/other.log', 'src/debug.log']);
    const back = await packTree(root, { ...opts, exclude: ['.git/', '!dist/'] });
    expect(paths(back.data)).toContain('file:dist/app.js');
  });

  it('skips FIFOs and sockets (never opened)', async () => {
    const root = tree({ 'a.txt': 'a' });
    execFileSync('mkfifo', [join(root, 'pipe')]);
    const packed = await packTree(root, opts);
    expect(paths(packed.data)).toEqual(['file:a.txt']);
    expect(packed.skipped.counts.special).toBe(1);
  });
});
