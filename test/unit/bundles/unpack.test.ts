/**
 * The worker side of repository bundles (docs/security.md#repository-bundles): a bundle is
 * verified against its digest, read strictly and unpacked atomically into the cache; hostile
 * archives are refused with bundle_changed and leave nothing behind.
 */
import { tempPath } from '../../helpers/temp-dir.js';
import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createBundleCache, type BundleSource } from '../../../src/bundles/bundle-cache.js';
import { readBundleTar, writeBundleTar } from '../../../src/bundles/bundle-tar.js';
import { packTree } from '../../../src/bundles/pack.js';
import { resolvesInside } from '../../../src/bundles/symlink-paths.js';
import { packRepo } from '../../../src/bundles/pack-as-caller.js';
import { FusionError } from '../../../src/errors.js';
import { createLogger } from '../../../src/log.js';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const tmp = (prefix: string): string => {
  const d = tempPath(prefix);
  dirs.push(d);
  return d;
};
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
const log = createLogger({ level: 'silent' });
const LIMITS = { maxBytes: 1024 * 1024, maxEntries: 1000 };

/** One raw ustar header (any type, name, link), for archives the packer would never write. */
function rawHeader(name: string, type: string, size = 0, linkname = ''): Buffer {
  const h = Buffer.alloc(512, 0);
  h.write(name, 0, 100, 'utf8');
  h.write('0000644\0', 100, 8, 'latin1');
  h.write('0000000\0', 108, 8, 'latin1');
  h.write('0000000\0', 116, 8, 'latin1');
  h.write(`${size.toString(8).padStart(11, '0')}\0`, 124, 12, 'latin1');
  h.write('00000000000\0', 136, 12, 'latin1');
  h.write(type, 156, 1, 'latin1');
  h.write(linkname, 157, 100, 'utf8');
  h.write('ustar\0', 257, 6, 'latin1');
  h.write('00', 263, 2, 'latin1');
  h.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'latin1');
  return h;
}
function archive(...parts: Buffer[]): Buffer {
  return Buffer.concat([...parts, Buffer.alloc(1024, 0)]);
}
function fileMember(name: string, text: string): Buffer {
  const data = Buffer.from(text);
  return Buffer.concat([rawHeader(name, '0', data.length), data, Buffer.alloc((512 - (data.length % 512)) % 512, 0)]);
}

function sourceOf(bundles: Map<string, Buffer>): BundleSource {
  return { getRepoBundle: async (digest) => (bundles.has(digest) ? { digest, data: bundles.get(digest)! } : null) };
}

describe('readBundleTar refuses hostile archives', () => {
  const cases: Array<[string, Buffer, RegExp]> = [
    ['a .. path', archive(fileMember('../evil', 'x')), /unsafe path/u],
    ['an absolute path', archive(fileMember('/etc/evil', 'x')), /unsafe path/u],
    ['a hard link', archive(rawHeader('a', '0'), rawHeader('b', '1', 0, 'a')), /tar type "1"/u],
    ['a character device', archive(rawHeader('null', '3')), /tar type "3"/u],
    ['a block device', archive(rawHeader('sda', '4')), /tar type "4"/u],
    ['a FIFO', archive(rawHeader('pipe', '6')), /tar type "6"/u],
    ['a PAX header', archive(rawHeader('PaxHeader', 'x')), /tar type "x"/u],
    ['an absolute symlink', archive(rawHeader('l', '2', 0, '/etc/passwd')), /leaves the repository/u],
    ['a symlink climbing out', archive(rawHeader('d/', '5'), rawHeader('d/l', '2', 0, '../../x')), /leaves the repository/u],
    ['a symlink escaping through another link', archive(rawHeader('dot', '2', 0, '.'), rawHeader('s', '2', 0, 'dot/../x')), /leaves the repository/u],
    ['a file written through a symlink', archive(rawHeader('l', '2', 0, 'd'), fileMember('l/x', 'x')), /not below a directory entry/u],
    ['a file without its directory entry', archive(fileMember('d/x', 'x')), /not below a directory entry/u],
    ['a path twice', archive(fileMember('a', 'x'), fileMember('a', 'y')), /appears twice/u],
    ['bytes after the end', Buffer.concat([archive(fileMember('a', 'x')), Buffer.from('junk')]), /follow the end/u],
    ['a truncated archive', fileMember('a', 'x'), /truncated/u],
  ];
  for (const [what, tar, message] of cases) {
    it(`refuses ${what}`, () => {
      let err: unknown;
      try {
        readBundleTar(tar, LIMITS);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(FusionError);
      expect((err as FusionError).code).toBe('bundle_changed');
      expect((err as FusionError).message).toMatch(message);
    });
  }

  it('refuses a corrupt checksum and files over the size limit', () => {
    const good = archive(fileMember('a', 'x'.repeat(2000)));
    const bad = Buffer.from(good);
    bad[0] = 'b'.charCodeAt(0);
    expect(() => readBundleTar(bad, LIMITS)).toThrow(/corrupt tar header/u);
    expect(() => readBundleTar(good, { maxBytes: 1000, maxEntries: 10 })).toThrow(/exceed 1000 bytes/u);
    expect(() => readBundleTar(good, { maxBytes: 10_000, maxEntries: 0 })).toThrow(/more than 0 entries/u);
  });

  it('reads back exactly what the writer wrote', () => {
    const entries = [
      { type: 'dir' as const, path: 'd' },
      { type: 'file' as const, path: 'd/x', executable: true, data: Buffer.from('x') },
      { type: 'symlink' as const, path: 'l', target: 'd/x' },
    ];
    const read = readBundleTar(writeBundleTar(entries), LIMITS);
    expect(read.map((e) => (e.type === 'file' ? { ...e, data: e.data.toString() } : e))).toEqual([
      { type: 'dir', path: 'd' }, { type: 'file', path: 'd/x', executable: true, data: 'x' }, { type: 'symlink', path: 'l', target: 'd/x' },
    ]);
  });
});

describe('bundle cache', () => {
  it('verifies, unpacks atomically with normalised modes, and reuses a tree by digest', async () => {
    const repo = tmp('fusion-repo-');
    mkdirSync(join(repo, 'src'));
    writeFileSync(join(repo, 'src', 'a.ts'), 'export const a = 1;\n', { mode: 0o664 });
    writeFileSync(join(repo, 'run.sh'), '#!/bin/sh\n', { mode: 0o745 });
    symlinkSync('src/a.ts', join(repo, 'link'));
    const packed = await packTree(repo, { exclude: [], maxBytes: 1024 * 1024 });
    let fetches = 0;
    const bundles = new Map([[packed.digest, packed.data]]);
    const source: BundleSource = { getRepoBundle: async (d) => (fetches++, sourceOf(bundles).getRepoBundle(d)) };
    const dir = join(tmp('fusion-cache-'), 'bundles');
    const cache = await createBundleCache({ dir, store: source, maxBytes: 1024 * 1024, log });
    const [t1, t2] = await Promise.all([cache.checkout(packed.digest), cache.checkout(packed.digest)]);
    expect(t1).toBe(join(dir, packed.digest));
    expect(t2).toBe(t1);
    expect(await cache.checkout(packed.digest)).toBe(t1);
    expect(fetches).toBe(1);
    expect(readFileSync(join(t1, 'src', 'a.ts'), 'utf8')).toBe('export const a = 1;\n');
    expect(lstatSync(join(t1, 'src', 'a.ts')).mode & 0o777).toBe(0o644);
    expect(lstatSync(join(t1, 'run.sh')).mode & 0o777).toBe(0o755);
    expect(lstatSync(join(t1, 'src')).mode & 0o777).toBe(0o755);
    expect(lstatSync(t1).mode & 0o777).toBe(0o755);
    expect(readlinkSync(join(t1, 'link'))).toBe('src/a.ts');
    expect(readdirSync(dir)).toEqual([packed.digest]);
    // Repacking the unpacked tree gives the same digest.
    expect((await packTree(t1, { exclude: [], maxBytes: 1024 * 1024 })).digest).toBe(packed.digest);
  });

  it('a tree reaches its digest path only once its files are on disk (flushed before the rename: a power loss never leaves a torn tree there)', async () => {
    const data = writeBundleTar([{ type: 'dir', path: 'd' }, { type: 'file', path: 'd/a', executable: false, data: Buffer.from('a') }]);
    const digest = sha(data);
    const dir = join(tmp('fusion-cache-'), 'bundles');
    const flushed: Array<{ path: string; finalExists: boolean; file: string }> = [];
    const cache = await createBundleCache({
      dir, store: sourceOf(new Map([[digest, data]])), maxBytes: 1024 * 1024, log,
      flush: async (path) => {
        flushed.push({ path, finalExists: readdirSync(dir).includes(digest), file: readFileSync(join(path, 'd', 'a'), 'utf8') });
      },
    });
    const tree = await cache.checkout(digest);
    expect(flushed).toHaveLength(1);
    expect(flushed[0]!.path.startsWith(join(dir, '.partial-'))).toBe(true);
    expect(flushed[0]!.finalExists).toBe(false);
    expect(flushed[0]!.file).toBe('a');
    expect(readFileSync(join(tree, 'd', 'a'), 'utf8')).toBe('a');
  });

  it('refuses bytes that changed since submission, a missing bundle and a hostile archive, leaving nothing', async () => {
    const good = writeBundleTar([{ type: 'file', path: 'a', executable: false, data: Buffer.from('a') }]);
    const digest = sha(good);
    const changed = Buffer.from(good);
    changed[512] = 'b'.charCodeAt(0);
    const hostile = archive(rawHeader('l', '2', 0, '/etc'));
    const dir = join(tmp('fusion-cache-'), 'bundles');
    const cache = await createBundleCache({ dir, store: sourceOf(new Map([[digest, changed], [sha(hostile), hostile]])), maxBytes: 1024 * 1024, log });
    const code = (p: Promise<unknown>): Promise<string> => p.then(() => 'ok', (e: unknown) => (e as FusionError).code);
    await expect(cache.checkout(digest).catch((e: unknown) => (e as Error).message)).resolves.toMatch(/bytes changed since it was packed/u);
    expect(await code(cache.checkout('0'.repeat(64)))).toBe('bundle_changed');
    expect(await code(cache.checkout(sha(hostile)))).toBe('bundle_changed');
    expect(await code(cache.checkout('../etc'))).toBe('bundle_changed');
    expect(readdirSync(dir)).toEqual([]);
  });

  it('packs as a non-root caller through setpriv: what only that uid may read is packed, others are refused', async () => {
    const home = tmp('fusion-home-');
    const repo = join(home, 'repo');
    mkdirSync(join(repo, 'src'), { recursive: true });
    writeFileSync(join(repo, 'src', 'a.ts'), 'a');
    writeFileSync(join(repo, 'secret'), 's', { mode: 0o600 });
    writeFileSync(join(repo, 'shared'), 's', { mode: 0o644 });
    const { execFileSync } = await import('node:child_process');
    execFileSync('chown', ['-R', '65534:65534', home]);
    execFileSync('chmod', ['0700', home]);
    // The repository is reachable only as the caller (0700 home); the kernel decides what the
    // caller reads: its own 0600 file is packed, root's 0600 file is not (counted and named).
    writeFileSync(join(repo, 'secret.root'), 'r', { mode: 0o600 });
    const caller = { uid: 65534, gid: 65534, pid: 1, groups: [] };
    const packed = await packRepo({ repo, exclude: [], maxBytes: 1024 * 1024, caller });
    expect(readBundleTar(packed.data, LIMITS).map((e) => e.path)).toEqual(['secret', 'shared', 'src', 'src/a.ts']);
    expect(packed.skipped.counts.unreadable).toBe(1);
    expect(packed.skipped.paths.unreadable).toEqual(['secret.root']);
    expect(packed.digest).toBe(sha(packed.data));
    const other = { uid: 65533, gid: 65533, pid: 1, groups: [] };
    const err = await packRepo({ repo, exclude: [], maxBytes: 1024 * 1024, caller: other }).catch((e: unknown) => e as FusionError);
    expect(err).toBeInstanceOf(FusionError);
    const tooBig = await packRepo({ repo, exclude: [], maxBytes: 1024, caller }).catch((e: unknown) => e as FusionError);
    expect((tooBig as FusionError).details).toMatchObject({ field: 'repo', reason: 'repo_too_large' });
  });
});

describe('symlink resolution is bounded work', () => {
  // Each link of a hostile tree may cost the daemon's main thread (it reads every bundle at
  // submission and at checkout): 40 hops of a 50-component target are ~2000 steps, ~60 s of
  // blocking for a 256 MiB archive of such links. A link needing more steps than any source tree
  // does counts as leaving the tree.
  const loop = `${'q/'.repeat(16)}${'../'.repeat(15)}..`;

  it('a link whose resolution takes more than the step budget is refused, a plain chain is not', () => {
    expect(resolvesInside(() => undefined, 'x', 'a/b/../c')).toBe(true);
    const tree = new Map<string, { type: 'symlink'; target: string }>([['a', { type: 'symlink', target: loop }]]);
    const lookup = (p: string) => tree.get(p);
    expect(resolvesInside(lookup, 'l', 'a')).toBe(true);
    expect(resolvesInside(lookup, 'l', `${'a/'.repeat(39)}a`)).toBe(false);
    // A chain of ten links, each one hop: well within the budget.
    const chain = new Map<string, { type: 'symlink'; target: string }>();
    for (let i = 0; i < 10; i++) chain.set(`c${i}`, { type: 'symlink', target: i === 9 ? 'src/file' : `c${i + 1}` });
    expect(resolvesInside((p) => chain.get(p), 'l', 'c0')).toBe(true);
    expect(() => readBundleTar(writeBundleTar([
      { type: 'symlink', path: 'a', target: loop },
      { type: 'symlink', path: 'l', target: `${'a/'.repeat(39)}a` },
    ]), LIMITS)).toThrow(/leaves the repository/u);
  });
});
