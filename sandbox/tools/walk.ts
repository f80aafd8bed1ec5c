/**
 * Depth-first directory walk for grep and find.
 *
 * - Never follows symlinks: a symlink is reported as `symlink` and never descended. Callers
 *   that want to use a symlinked file must check its realpath with `resolveSymlinkTarget`.
 * - Skips `.git` and `node_modules` (and never descends them) unless the walk starts inside
 *   one of them: pointing `path` there explicitly is how a caller opts in.
 * - Tree order (entries by code-unit name order, a directory's contents right after it), so
 *   output is deterministic.
 * - Bounded by an entry budget and a deadline; the caller learns why it stopped.
 */
import type { Dirent } from 'node:fs';
import { readdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { isInside } from '../path-confine.js';
import { memoDir } from './repo-memo.js';

export const SKIPPED_DIR_NAMES: ReadonlySet<string> = new Set(['.git', 'node_modules']);

export type WalkKind = 'file' | 'dir' | 'symlink' | 'other';

export interface WalkEntry {
  /** Absolute path (under the real root, not resolved further). */
  readonly absPath: string;
  /** Repo-relative `/`-separated path. */
  readonly repoPath: string;
  /** Path relative to the walk's start directory. */
  readonly basePath: string;
  readonly kind: WalkKind;
}

export interface WalkOptions {
  /** Real path of the start directory (from resolveInRepo). */
  readonly startReal: string;
  /** Its repo-relative display path (`.` for the root). */
  readonly startDisplay: string;
  readonly maxEntries: number;
  readonly deadline: number;
}

export interface WalkState {
  visited: number;
  stopped: 'entries' | 'time' | null;
  unreadableDirs: number;
}

function kindOf(d: Dirent): WalkKind {
  if (d.isSymbolicLink()) return 'symlink';
  if (d.isDirectory()) return 'dir';
  if (d.isFile()) return 'file';
  return 'other';
}

function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export function joinRepoPath(dir: string, name: string): string {
  return dir === '.' || dir === '' ? name : `${dir}/${name}`;
}

/** True when the start path is itself inside a normally skipped directory. */
export function startsInsideSkipped(startDisplay: string): boolean {
  return startDisplay.split('/').some((seg) => SKIPPED_DIR_NAMES.has(seg));
}

interface OpenDir {
  abs: string;
  repo: string;
  base: string;
  dirents: Dirent[];
  next: number;
}

/** Tree order: entries by name, a directory's contents right after the directory itself. */
export async function* walk(options: WalkOptions, state: WalkState): AsyncGenerator<WalkEntry> {
  const skipIgnored = !startsInsideSkipped(options.startDisplay);
  const stack: OpenDir[] = [];
  const enter = async (abs: string, repo: string, base: string): Promise<void> => {
    const dirents = await memoDir(abs, async () => (await readdir(abs, { withFileTypes: true })).sort((a, b) => compareNames(a.name, b.name)));
    if (dirents === null) state.unreadableDirs += 1;
    else stack.push({ abs, repo, base, dirents, next: 0 });
  };
  await enter(options.startReal, options.startDisplay, '');
  while (stack.length > 0) {
    const dir = stack[stack.length - 1] as OpenDir;
    const d = dir.dirents[dir.next];
    if (d === undefined) {
      stack.pop();
      continue;
    }
    dir.next += 1;
    if (state.visited >= options.maxEntries) {
      state.stopped = 'entries';
      return;
    }
    if (Date.now() > options.deadline) {
      state.stopped = 'time';
      return;
    }
    state.visited += 1;
    const kind = kindOf(d);
    if (kind === 'dir' && skipIgnored && SKIPPED_DIR_NAMES.has(d.name)) continue;
    const entry: WalkEntry = {
      absPath: path.join(dir.abs, d.name),
      repoPath: joinRepoPath(dir.repo, d.name),
      basePath: dir.base === '' ? d.name : `${dir.base}/${d.name}`,
      kind,
    };
    yield entry;
    if (kind === 'dir') await enter(entry.absPath, entry.repoPath, entry.basePath);
  }
}

/**
 * Where a symlink found during a walk leads, if it stays inside the root:
 * `file`/`dir`, or null when it dangles or its realpath leaves the root.
 */
export async function resolveSymlinkTarget(realRoot: string, absPath: string): Promise<{ realPath: string; kind: 'file' | 'dir' | 'other' } | null> {
  try {
    const real = await realpath(absPath);
    if (!isInside(realRoot, real)) return null;
    const st = await stat(real);
    return { realPath: real, kind: st.isFile() ? 'file' : st.isDirectory() ? 'dir' : 'other' };
  } catch {
    return null;
  }
}
