/**
 * Confines user-supplied paths to the repository root (`/repo` inside the sandbox).
 *
 * Security notes:
 * - The lexical check (`..`, absolute paths) is only a fast first filter; the decisive check is
 *   on the realpath, so symlinks anywhere in the path (final component or intermediate
 *   directories) cannot lead outside the root.
 * - When the target does not exist we still resolve its deepest existing ancestor, so a symlink
 *   pointing outside cannot be used to probe which outside files exist ("not found" vs
 *   "outside" would otherwise leak that).
 * - Error messages never contain host paths: only the repo-relative display form, or the
 *   caller's own relative input (JSON-quoted, shortened). An absolute input outside the root
 *   is not echoed.
 *
 * Node builtins only: this file runs inside the sandbox.
 */
import { lstat, realpath } from 'node:fs/promises';
import path from 'node:path';

export interface ResolvedPath {
  /** Absolute path with every symlink resolved; guaranteed to be inside the real root. */
  readonly realPath: string;
  /** Lexical repo-relative path with `/` separators (`.` for the root itself), for output. */
  readonly displayPath: string;
}

export type PathConfineReason = 'invalid' | 'outside' | 'not_found' | 'unreadable';

export class PathConfineError extends Error {
  override readonly name = 'PathConfineError';
  constructor(
    readonly reason: PathConfineReason,
    message: string,
  ) {
    super(message);
  }
}

const MAX_PATH_CHARS = 4096;

/** Quote a caller-supplied string for an error message: JSON-escaped and shortened. */
export function quoteForMessage(value: string, maxChars = 200): string {
  const cut = value.length > maxChars ? `${value.slice(0, maxChars)}…` : value;
  return JSON.stringify(cut);
}

/** True when `candidate` is `base` or lies below it (both absolute and normalised). */
export function isInside(base: string, candidate: string): boolean {
  if (candidate === base) return true;
  const prefix = base.endsWith(path.sep) ? base : base + path.sep;
  return candidate.startsWith(prefix);
}

/** Realpath of the root, cached per root string (the root does not move during a run). */
const realRootCache = new Map<string, Promise<string>>();

export function realRootOf(root: string): Promise<string> {
  const abs = path.resolve(root);
  let cached = realRootCache.get(abs);
  if (cached === undefined) {
    cached = realpath(abs);
    // A failed lookup must not poison the cache (e.g. a temp root created later).
    cached.catch(() => realRootCache.delete(abs));
    realRootCache.set(abs, cached);
  }
  return cached;
}

/**
 * Resolve `userPath` (relative to `root`, or absolute inside `root`) to a real path inside
 * the root. Throws `PathConfineError` on any escape or lookup failure.
 */
export async function resolveInRepo(root: string, userPath: string): Promise<ResolvedPath> {
  if (typeof userPath !== 'string') {
    throw new PathConfineError('invalid', 'path must be a string');
  }
  const absRoot = path.resolve(root);
  let realRoot: string;
  try {
    realRoot = await realRootOf(absRoot);
  } catch {
    throw new PathConfineError('unreadable', 'repository root is not accessible');
  }
  return resolveBelowRealRoot(absRoot, realRoot, userPath);
}

/**
 * The confinement itself, for a caller that already holds the root's real path (the host's
 * citation checks, which read a different task snapshot each time and so keep no per-root
 * cache). `absRoot` is the root as given, accepted for absolute inputs beside `realRoot`.
 */
export async function resolveBelowRealRoot(absRoot: string, realRoot: string, userPath: string): Promise<ResolvedPath> {
  if (userPath.includes('\0')) {
    throw new PathConfineError('invalid', 'path must not contain NUL bytes');
  }
  if (userPath.length > MAX_PATH_CHARS) {
    throw new PathConfineError('invalid', `path is longer than ${MAX_PATH_CHARS} characters`);
  }
  const relative = toRepoRelative(absRoot, realRoot, userPath);
  const displayPath = relative === '' ? '.' : relative.split(path.sep).join('/');
  const lexical = relative === '' ? realRoot : path.join(realRoot, relative);

  let real: string;
  try {
    real = await realpath(lexical);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const diagnosis = await diagnoseUnresolvable(realRoot, lexical);
    if (diagnosis === 'outside') {
      throw new PathConfineError('outside', `path resolves outside the repository: ${displayPath}`);
    }
    if (diagnosis === 'link' || code === 'ELOOP') {
      throw new PathConfineError('unreadable', `path contains a symbolic link that cannot be resolved: ${displayPath}`);
    }
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw new PathConfineError('not_found', `path not found: ${displayPath}`);
    }
    throw new PathConfineError('unreadable', `path cannot be resolved: ${displayPath}`);
  }
  if (!isInside(realRoot, real)) {
    throw new PathConfineError('outside', `path resolves outside the repository: ${displayPath}`);
  }
  return { realPath: real, displayPath };
}

/**
 * Lexically map the user's path to a normalised path relative to the root ('' = root).
 * Absolute inputs are accepted when they lie under the root as given or under its realpath
 * (`/repo/src/x.ts`, or `/private/tmp/...` for a `/tmp/...` root on some systems).
 */
function toRepoRelative(absRoot: string, realRoot: string, userPath: string): string {
  if (path.isAbsolute(userPath)) {
    const abs = path.resolve(userPath);
    for (const base of [absRoot, realRoot]) {
      if (isInside(base, abs)) return path.relative(base, abs);
    }
    // The absolute input is deliberately not echoed: it may be a host path.
    throw new PathConfineError('outside', 'absolute path is outside the repository');
  }
  // Resolve against a virtual root so `..` can be checked without touching the filesystem.
  const normalised = path.normalize(userPath);
  if (normalised === '..' || normalised.startsWith(`..${path.sep}`) || path.isAbsolute(normalised)) {
    throw new PathConfineError('outside', `path escapes the repository: ${quoteForMessage(userPath)}`);
  }
  const rel = normalised === '.' || normalised === `.${path.sep}` ? '' : normalised;
  return rel.endsWith(path.sep) ? rel.slice(0, -1) : rel;
}

/**
 * For a path whose realpath failed: find the deepest ancestor that resolves. If it resolves
 * outside the root the path escapes; if the next component is a (dangling) symlink we say so
 * without telling whether its target exists, so outside files cannot be probed through it.
 */
async function diagnoseUnresolvable(realRoot: string, lexical: string): Promise<'outside' | 'link' | 'missing'> {
  let child = lexical;
  let current = path.dirname(lexical);
  for (;;) {
    let real: string | undefined;
    try {
      real = await realpath(current);
    } catch {
      real = undefined;
    }
    if (real !== undefined) {
      if (!isInside(realRoot, real)) return 'outside';
      try {
        const st = await lstat(path.join(real, path.basename(child)));
        return st.isSymbolicLink() ? 'link' : 'missing';
      } catch {
        return 'missing';
      }
    }
    if (current === realRoot || !isInside(realRoot, current)) return 'missing';
    child = current;
    current = path.dirname(current);
  }
}
