/**
 * Packs a repository tree into its bundle (bundle-tar.ts) and names it by digest
 * (docs/operations.md#repository-snapshots, docs/security.md#repository-bundles).
 *
 * Runs as the submitting caller (pack-as-caller.ts), so the kernel decides what it reads: a file
 * is packed when the caller can open it (mode bits, group bits, ACLs and LSMs all count), a
 * directory when the caller can list and enter it; a root caller reads everything. Nothing is
 * followed: the walk lstat()s, a file is opened with O_NOFOLLOW and must still be the regular
 * file the walk saw. Kept: directories, regular files, and symlinks that resolve inside the tree
 * (symlink-paths.ts). Left out, counted and (a bounded list) named, by reason:
 *
 * - `unreadable`: the caller may not read it;
 * - `secret`: the secrets rule (excludes.ts, SECRET_REPO_EXCLUDES);
 * - `excluded`: the task's own `repoExclude` patterns;
 * - `ignored`: the checkout's `.gitignore` files (root and nested, git's semantics) and `.git/`;
 * - `special`: FIFOs, sockets and devices; `escapingLinks`: symlinks that leave the tree.
 *
 * The task's patterns decide first (their `!pattern` re-includes what a `.gitignore` leaves
 * out), then the `.gitignore` files. The cap is on the archive's size and is checked before each
 * file is read, so an oversized repository is refused early.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { access, lstat, open, readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { FusionError } from '../errors.js';
import { writeBundleTar, type BundleEntry } from './bundle-tar.js';
import { END_BYTES, entryArchiveBytes, ustarSplit } from '../common/ustar.js';
import { compileExcludes, createGitignoreStack, SECRET_REPO_EXCLUDES, VCS_REPO_EXCLUDES } from './excludes.js';
import { resolvesInside } from './symlink-paths.js';

export interface PackOptions {
  /** `.gitignore`-style patterns (excludes.ts): the task's `repoExclude`, or DEFAULT_REPO_EXCLUDES. */
  exclude: readonly string[];
  /** Cap on the archive's size in bytes. */
  maxBytes: number;
}

export const SKIP_REASONS = ['unreadable', 'secret', 'excluded', 'ignored', 'special', 'escapingLinks'] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];

/** What a pack left out: counts per reason, and the first paths of each (bounded). */
export interface SkipReport {
  counts: Record<SkipReason, number>;
  /** At most MAX_SKIPPED_PATHS per reason, in walk order (sorted), each at most MAX_SKIPPED_PATH_CHARS. */
  paths: Record<SkipReason, string[]>;
}

export const MAX_SKIPPED_PATHS = 20;
export const MAX_SKIPPED_PATH_CHARS = 200;

export interface PackedBundle {
  /** sha256 (hex) of `data`: the bundle's content address. */
  digest: string;
  data: Buffer;
  entries: number;
  /** Regular files among the entries: 0 with files skipped means the task can read none of the repository's. */
  files: number;
  skipped: SkipReport;
}

export function emptySkipReport(): SkipReport {
  const counts = Object.fromEntries(SKIP_REASONS.map((r) => [r, 0])) as Record<SkipReason, number>;
  const paths = Object.fromEntries(SKIP_REASONS.map((r) => [r, [] as string[]])) as Record<SkipReason, string[]>;
  return { counts, paths };
}

/** A path as reported: one line, bounded. */
function reportedPath(path: string): string {
  let flat = '';
  for (const c of path) flat += c === '`' || c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f ? '?' : c;
  return flat.length <= MAX_SKIPPED_PATH_CHARS ? flat : `${flat.slice(0, MAX_SKIPPED_PATH_CHARS - 1)}…`;
}

/** Adds one skipped path to a report. */
export function noteSkipped(report: SkipReport, reason: SkipReason, path: string): void {
  report.counts[reason]++;
  if (report.paths[reason].length < MAX_SKIPPED_PATHS) report.paths[reason].push(reportedPath(path));
}

/**
 * A report from an untrusted source (the packing child runs as the caller): counts that are
 * non-negative integers, path lists bounded and flattened; anything else reads as nothing.
 */
export function sanitiseSkipReport(raw: unknown): SkipReport {
  const out = emptySkipReport();
  const r = raw as { counts?: Record<string, unknown>; paths?: Record<string, unknown> } | null;
  for (const reason of SKIP_REASONS) {
    const n = r?.counts?.[reason];
    if (Number.isSafeInteger(n) && (n as number) >= 0) out.counts[reason] = n as number;
    const list = r?.paths?.[reason];
    if (Array.isArray(list)) out.paths[reason] = list.filter((p): p is string => typeof p === 'string').slice(0, MAX_SKIPPED_PATHS).map(reportedPath);
  }
  return out;
}

/** The cap was reached: nothing was stored. The message names the field and the ways out. */
export function bundleTooLarge(maxBytes: number, path: string): FusionError {
  const mib = Math.floor(maxBytes / (1024 * 1024));
  return new FusionError('invalid_input',
    `repo packs into more than ${mib} MiB (the repository bundle cap, reached at ${JSON.stringify(path)}); nothing was created. ` +
    'Leave large paths out with options.repoExclude (".gitignore"-style patterns) or the repository\'s .gitignore, or raise FUSION_BUNDLE_MAX_MB on the daemon', {
      details: { field: 'repo', reason: 'repo_too_large', maxBytes },
    });
}

function unrepresentable(path: string, why: string): FusionError {
  return new FusionError('invalid_input', `repo: ${JSON.stringify(path)} cannot be packed into the repository bundle (${why}); nothing was created. Leave it out with options.repoExclude`, {
    details: { field: 'repo', reason: 'unpackable_path', path },
  });
}

const isDenied = (err: unknown): boolean => ['EACCES', 'EPERM', 'ENOENT', 'ELOOP', 'ENOTDIR'].includes((err as NodeJS.ErrnoException).code ?? '');

/** The largest `.gitignore` read (a source tree's are a few KiB). */
const MAX_GITIGNORE_BYTES = 1024 * 1024;
const SECRET_PATTERNS = new Set(SECRET_REPO_EXCLUDES);
const VCS_PATTERNS = new Set(VCS_REPO_EXCLUDES);

export async function packTree(root: string, options: PackOptions): Promise<PackedBundle> {
  const matcher = compileExcludes(options.exclude);
  const gitignore = createGitignoreStack();
  const entries: BundleEntry[] = [];
  const skipped = emptySkipReport();
  /** Why `path` is left out by a pattern, or undefined when it is kept. */
  const patternSkip = (path: string, isDir: boolean): SkipReason | undefined => {
    const m = matcher.match(path, isDir);
    if (m !== undefined) {
      if (!m.excluded) return undefined;
      return SECRET_PATTERNS.has(m.pattern) ? 'secret' : VCS_PATTERNS.has(m.pattern) ? 'ignored' : 'excluded';
    }
    return gitignore.ignores(path, isDir) ? 'ignored' : undefined;
  };
  let size = END_BYTES;
  const charge = (bytes: number, path: string): void => {
    size += entryArchiveBytes(bytes);
    if (size > options.maxBytes) throw bundleTooLarge(options.maxBytes, path);
  };
  const checkName = (path: string, archivePath: string): void => {
    if (ustarSplit(archivePath) === null) throw unrepresentable(path, 'the path is too long for the archive');
  };

  /** The names of a directory the caller can list and enter; null when it cannot. */
  const list = async (rel: string): Promise<string[] | null> => {
    const abs = rel === '' ? root : join(root, rel);
    try {
      // Both bits, as the caller (the kernel decides: ACLs and LSMs count): listable but not
      // enterable would pack names without their files.
      await access(abs, constants.R_OK | constants.X_OK);
      return await readdir(abs);
    } catch (err) {
      if (rel === '') throw new FusionError('invalid_input', `repo ${root} is not a directory the caller can read; nothing was created`, { details: { field: 'repo' }, cause: err });
      if (isDenied(err)) return null;
      throw err;
    }
  };

  const walk = async (rel: string, names: string[]): Promise<void> => {
    if (names.includes('.gitignore')) {
      const abs = join(root, rel, '.gitignore');
      const info = await lstat(abs).catch(() => null);
      if (info?.isFile() === true && info.size <= MAX_GITIGNORE_BYTES) {
        const text = await readRegular(abs, info.ino);
        if (text !== null) gitignore.push(rel, text.toString('utf8'));
      }
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
          noteSkipped(skipped, 'unreadable', path);
          continue;
        }
        throw err;
      }
      const byPattern = patternSkip(path, info.isDirectory());
      if (byPattern !== undefined) {
        noteSkipped(skipped, byPattern, info.isDirectory() ? `${path}/` : path);
        continue;
      }
      if (info.isDirectory()) {
        const children = await list(path);
        if (children === null) {
          noteSkipped(skipped, 'unreadable', `${path}/`);
          continue;
        }
        checkName(path, `${path}/`);
        charge(0, path);
        entries.push({ type: 'dir', path });
        await walk(path, children);
      } else if (info.isFile()) {
        checkName(path, path);
        charge(info.size, path);
        const data = await readRegular(abs, info.ino);
        if (data === null) {
          noteSkipped(skipped, 'unreadable', path);
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
        noteSkipped(skipped, 'special', path);
      }
    }
  };
  await walk('', (await list(''))!);

  // Links are judged over the final tree, again after each removal (a link through a dropped
  // link would otherwise be judged against a tree that no longer has it).
  let kept = entries;
  for (;;) {
    const byPath = new Map(kept.map((e) => [e.path, e]));
    const next = kept.filter((e) => {
      if (e.type !== 'symlink' || resolvesInside((p) => byPath.get(p), e.path, e.target)) return true;
      noteSkipped(skipped, 'escapingLinks', e.path);
      return false;
    });
    if (next.length === kept.length) break;
    kept = next;
  }
  const data = writeBundleTar(kept);
  return { digest: createHash('sha256').update(data).digest('hex'), data, entries: kept.length, files: kept.filter((e) => e.type === 'file').length, skipped };
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
