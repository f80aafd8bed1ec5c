/**
 * `find {pattern, path?, max_results?, type?}`: repo-relative paths matching a glob, sorted,
 * one per line, directories suffixed `/`.
 *
 * The glob is tried against the path relative to `path` and against the repo-relative path;
 * a pattern without `/` matches the base name at any depth (`*.ts` finds every .ts file).
 * Same skip rules as grep: `.git`/`node_modules` unless `path` is inside them; symlinks are
 * never descended and are listed only when their realpath stays inside the root (`type`
 * then applies to the target).
 */
import { stat } from 'node:fs/promises';
import { resolveInRepo, realRootOf } from '../path-confine.js';
import { parseArgs } from './args.js';
import { compileGlob, MAX_GLOB_CHARS } from './glob.js';
import { CappedLines, plural, toolError } from './output.js';
import type { ToolImpl } from './types.js';
import { ARG_LIMITS, resolveLimits } from './types.js';
import { resolveSymlinkTarget, walk } from './walk.js';
import type { WalkState } from './walk.js';

const SPEC = {
  pattern: { type: 'string', required: true, nonBlank: true, maxChars: MAX_GLOB_CHARS },
  path: { type: 'string', nonBlank: true },
  max_results: { type: 'integer', min: 1, max: ARG_LIMITS.findMaxResults },
  type: { type: 'enum', values: ['file', 'dir'] },
} as const;

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export const findTool: ToolImpl = async (root, args, limitsIn) => {
  try {
    const limits = resolveLimits(limitsIn);
    const parsed = parseArgs('find', SPEC, args);
    const matcher = compileGlob(parsed.pattern, { matchBase: true });
    const maxResults = parsed.max_results ?? ARG_LIMITS.findDefaultResults;
    const target = await resolveInRepo(root, parsed.path ?? '.');
    const realRoot = await realRootOf(root);
    const st = await stat(target.realPath);
    if (!st.isDirectory()) return { ok: false, error: `find: ${target.displayPath} is not a directory` };

    const deadline = Date.now() + limits.timeBudgetMs;
    const walkState: WalkState = { visited: 0, stopped: null, unreadableDirs: 0 };
    const found: string[] = [];
    let capReached = false;
    const entries = walk(
      { startReal: target.realPath, startDisplay: target.displayPath, maxEntries: limits.maxWalkEntries, deadline },
      walkState,
    );
    for await (const entry of entries) {
      if (!matcher(entry.basePath) && !matcher(entry.repoPath)) continue;
      let kind = entry.kind;
      if (kind === 'symlink') {
        const resolved = await resolveSymlinkTarget(realRoot, entry.absPath);
        if (resolved === null) continue;
        kind = resolved.kind;
      }
      if (parsed.type !== undefined && kind !== parsed.type) continue;
      if (found.length >= maxResults) {
        capReached = true;
        break;
      }
      found.push(kind === 'dir' ? `${entry.repoPath}/` : entry.repoPath);
    }

    found.sort(compareStrings);
    const out = new CappedLines(limits.maxOutputBytes);
    for (const line of found) if (!out.add(line)) break;
    const notes: string[] = [];
    if (found.length === 0) notes.push('[no matches]');
    if (capReached) {
      notes.push(`[result limit reached: showing the first ${found.length} results; narrow the pattern or path, or raise max_results]`);
    }
    if (out.truncated) {
      notes.push(`[truncated: output reached the ${limits.maxOutputBytes}-byte cap after ${plural(out.count, 'result', 'results')}]`);
    }
    if (walkState.stopped === 'time') notes.push(`[search stopped early: time budget of ${limits.timeBudgetMs} ms used up]`);
    if (walkState.stopped === 'entries') notes.push(`[search stopped early: visited ${walkState.visited} directory entries]`);
    if (walkState.unreadableDirs > 0) {
      notes.push(`[skipped: ${plural(walkState.unreadableDirs, 'unreadable directory', 'unreadable directories')}]`);
    }
    const text = out.finish(notes);
    return walkState.stopped === 'time' ? { ok: true, text, timerCut: true } : { ok: true, text };
  } catch (err) {
    return toolError('find', err);
  }
};
