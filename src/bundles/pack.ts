/**
 * Packs a repository tree into its bundle (bundle-tar.ts) and names it by digest
 * (docs/operations.md#cluster-mode, docs/security.md#repository-bundles).
 *
 * Runs as the submitting caller (pack-as-caller.ts), so it reads only what that caller could.
 * Nothing is followed: the walk lstat()s, a file is opened with O_NOFOLLOW and must still be the
 * regular file the walk saw. Kept: directories, regular files, and symlinks that resolve inside
 * the tree (symlink-paths.ts). Skipped and counted: symlinks that leave it (absolute targets,
 * `..` above the root), FIFOs, sockets and devices, entries the caller may not read, and entries
 * "others" may not read (a 0600 file, a 0700 directory): a sandbox reading the repository at its
 * path reads as another uid and could not read those either (docs/security.md#private-repos), so
 * the bundle, whose files every sandbox uid may read, must not hold them. The cap is on the archive's
 * size and is checked before each file is read, so an oversized repository is refused early.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { FusionError } from '../errors.js';
import { END_BYTES, entryArchiveBytes, ustarSplit, writeBundleTar, type BundleEntry } from './bundle-tar.js';
import { compileExcludes } from './excludes.js';
import { resolvesInside } from './symlink-paths.js';

export interface PackOptions {
  /** `.gitignore`-style patterns (excludes.ts). */
  exclude: readonly string[];
  /** Cap on the archive's size in bytes. */
  maxBytes: number;
}

export interface PackedBundle {
  /** sha256 (hex) of `data`: the bundle's content address. */
  digest: string;
  data: Buffer;
  entries: number;
  skipped: { escapingLinks: number; special: number; unreadable: number };
}

/** The cap was reached: nothing was stored. The message names the field and the ways out. */
export function bundleTooLarge(maxBytes: number, path: string): FusionError {
  const mib = Math.floor(maxBytes / (1024 * 1024));
  return new FusionError('invalid_input',
    `repo packs into more than ${mib} MiB (the repository bundle cap, reached at ${JSON.stringify(path)}); nothing was created. ` +
    'Leave large paths out with options.repoExclude (".gitignore"-style patterns), or raise FUSION_BUNDLE_MAX_MB on the daemon', {
      details: { field: 'repo', reason: 'repo_too_large', maxBytes },
    });
}

function unrepresentable(path: string, why: string): FusionError {
  return new FusionError('invalid_input', `repo: ${JSON.stringify(path)} cannot be packed into the repository bundle (${why}); nothing was created. Leave it out with options.repoExclude`, {
    details: { field: 'repo', reason: 'unpackable_path', path },
  });
}

/** o+rx on a directory, o+r on a file: what a sandbox uid, reading as "others", needs. */
const OTHERS_DIR = 0o005;
const OTHERS_FILE = 0o004;

const isDenied = (err: unknown): boolean => ['EACCES', 'EPERM', 'ENOENT', 'ELOOP', 'ENOTDIR'].includes((err as NodeJS.ErrnoException).code ?? '');

export async function packTree(root: string, options: PackOptions): Promise<PackedBundle> {
  const matcher = compileExcludes(options.exclude);
  const entries: BundleEntry[] = [];
  const skipped = { escapingLinks: 0, special: 0, unreadable: 0 };
  let size = END_BYTES;
  const charge = (bytes: number, path: string): void => {
    size += entryArchiveBytes(bytes);
    if (size > options.maxBytes) throw bundleTooLarge(options.maxBytes, path);
  };
  const checkName = (path: string, archivePath: string): void => {
    if (ustarSplit(archivePath) === null) throw unrepresentable(path, 'the path is too long for the archive');
  };

  const walk = async (rel: string): Promise<void> => {
    let names: string[];
    try {
      names = await readdir(rel === '' ? root : join(root, rel));
    } catch (err) {
      if (rel === '') throw new FusionError('invalid_input', `repo ${root} is not a directory the caller can read; nothing was created`, { details: { field: 'repo' }, cause: err });
      if (isDenied(err)) {
        skipped.unreadable++;
        return;
      }
      throw err;
    }
    for (const name of names.sort()) {
      const path = rel === '' ? name : `${rel}/${name}`;
      if (name.includes('\uFFFD')) throw unrepresentable(path, 'the name is not valid UTF-8');
      const abs = join(root, path);
      let info;
      try {
        info = await lstat(abs);
      } catch (err) {
        if (isDenied(err)) {
          skipped.unreadable++;
          continue;
        }
        throw err;
      }
      if (matcher.excludes(path, info.isDirectory())) continue;
      // What a sandbox uid could read at the path is what the bundle holds: it reads as "others".
      if ((info.isDirectory() && (info.mode & OTHERS_DIR) !== OTHERS_DIR) || (info.isFile() && (info.mode & OTHERS_FILE) !== OTHERS_FILE)) {
        skipped.unreadable++;
        continue;
      }
      if (info.isDirectory()) {
        checkName(path, `${path}/`);
        charge(0, path);
        entries.push({ type: 'dir', path });
        await walk(path);
      } else if (info.isFile()) {
        checkName(path, path);
        charge(info.size, path);
        const data = await readRegular(abs, info.ino);
        if (data === null) {
          skipped.unreadable++;
          continue;
        }
        // The file changed size since the lstat: charge what was read.
        if (data.length !== info.size) {
          size += entryArchiveBytes(data.length) - entryArchiveBytes(info.size);
          if (size > options.maxBytes) throw bundleTooLarge(options.maxBytes, path);
        }
        entries.push({ type: 'file', path, executable: (info.mode & 0o111) !== 0, data });
      } else if (info.isSymbolicLink()) {
        const target = await readlink(abs);
        checkName(path, path);
        if (Buffer.byteLength(target) > 100) throw unrepresentable(path, 'the symlink target is longer than 100 bytes');
        charge(0, path);
        entries.push({ type: 'symlink', path, target });
      } else {
        skipped.special++;
      }
    }
  };
  await walk('');

  // Links are judged over the final tree, again after each removal (a link through a dropped
  // link would otherwise be judged against a tree that no longer has it).
  let kept = entries;
  for (;;) {
    const byPath = new Map(kept.map((e) => [e.path, e]));
    const next = kept.filter((e) => e.type !== 'symlink' || resolvesInside((p) => byPath.get(p), e.path, e.target));
    skipped.escapingLinks += kept.length - next.length;
    if (next.length === kept.length) break;
    kept = next;
  }
  const data = writeBundleTar(kept);
  return { digest: createHash('sha256').update(data).digest('hex'), data, entries: kept.length, skipped };
}

/** The file's bytes, read through a descriptor that is still the inode the walk saw; null when unreadable. */
async function readRegular(abs: string, ino: number): Promise<Buffer | null> {
  let handle;
  try {
    handle = await open(abs, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    if (isDenied(err)) return null;
    throw err;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile() || info.ino !== ino) return null;
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}
