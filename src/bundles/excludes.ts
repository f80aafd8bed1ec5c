/**
 * `.gitignore`-style exclude patterns for repository bundles (docs/behaviour.md#repository-bundles).
 * No npm matcher is a dependency of the daemon, so this is the small subset git documents:
 *
 * - a blank line or one starting with `#` matches nothing; `\#`, `\!` escape the first character;
 * - `!pattern` re-includes what an earlier pattern excluded (the last matching pattern wins), but
 *   nothing below an excluded directory comes back: an excluded directory is not walked (as git);
 * - a trailing `/` matches directories only;
 * - a pattern with a `/` at the start or in the middle is anchored at the repository root; one
 *   without matches a name at any depth;
 * - `*` matches anything but `/`, `?` one character but `/`, `[…]` a class (`[!…]` negated);
 *   `**` as a whole segment matches any number of directories (`**\/x`, `a/**`, `a/**\/b`).
 */

export interface ExcludeMatcher {
  /** Whether the repository-relative `path` (no leading `/`) is excluded. */
  excludes(path: string, isDir: boolean): boolean;
}

interface Rule {
  negate: boolean;
  dirOnly: boolean;
  re: RegExp;
}

/** The default when a task sets no `repoExclude`: the git metadata is no part of the tree. */
export const DEFAULT_REPO_EXCLUDES: readonly string[] = ['.git/'];

function escapeRe(c: string): string {
  return /[\\^$.*+?()[\]{}|/]/u.test(c) ? `\\${c}` : c;
}

/** Translates one glob (no leading `/`, no trailing `/`) into a regular expression body. */
function globBody(glob: string): string {
  let out = '';
  const segments = glob.split('/');
  segments.forEach((seg, i) => {
    const last = i === segments.length - 1;
    if (seg === '**') {
      // `a/**` matches everything inside a; `**/b` and `a/**/b` any depth of directories.
      out += last ? '.*' : '(?:.*/)?';
      return;
    }
    for (let j = 0; j < seg.length; j++) {
      const c = seg[j]!;
      if (c === '*') out += '[^/]*';
      else if (c === '?') out += '[^/]';
      else if (c === '\\' && j + 1 < seg.length) out += escapeRe(seg[++j]!);
      else if (c === '[') {
        const close = seg.indexOf(']', j + 2);
        if (close === -1) {
          out += '\\[';
          continue;
        }
        let cls = seg.slice(j + 1, close);
        const negated = cls.startsWith('!') || cls.startsWith('^');
        if (negated) cls = cls.slice(1);
        out += `[${negated ? '^/' : ''}${cls.replace(/[\\\]]/gu, (m) => `\\${m}`)}]`;
        j = close;
      } else out += escapeRe(c);
    }
    if (!last) out += '/';
  });
  return out;
}

function compile(line: string): Rule | null {
  let p = line.replace(/(?<!\\)\s+$/u, '');
  if (p === '' || p.startsWith('#')) return null;
  let negate = false;
  if (p.startsWith('!')) {
    negate = true;
    p = p.slice(1);
  } else if (p.startsWith('\\#') || p.startsWith('\\!')) p = p.slice(1);
  const dirOnly = p.endsWith('/');
  if (dirOnly) p = p.replace(/\/+$/u, '');
  const anchored = p.includes('/');
  if (p.startsWith('/')) p = p.slice(1);
  if (p === '') return null;
  const body = globBody(p);
  const re = new RegExp(anchored ? `^${body}$` : `^(?:.*/)?${body}$`, 'u');
  return { negate, dirOnly, re };
}

export function compileExcludes(patterns: readonly string[]): ExcludeMatcher {
  const rules = patterns.map(compile).filter((r): r is Rule => r !== null);
  return {
    excludes(path, isDir) {
      let excluded = false;
      for (const rule of rules) {
        if (rule.dirOnly && !isDir) continue;
        if (rule.re.test(path)) excluded = !rule.negate;
      }
      return excluded;
    },
  };
}
