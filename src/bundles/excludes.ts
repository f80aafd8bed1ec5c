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
  /** The last pattern matching `path` (its text as given, and whether it excludes), or undefined when none does. */
  match(path: string, isDir: boolean): { excluded: boolean; pattern: string } | undefined;
}

interface Rule {
  negate: boolean;
  dirOnly: boolean;
  re: RegExp;
  source: string;
}

/**
 * The secrets rule (docs/operations.md#repository-snapshots): files that commonly hold
 * credentials are never put in a task's repository, whoever could read them. A task that sets
 * `repoExclude` replaces the default list (`[]` packs them), so the rule is a default a caller
 * can knowingly override, never a silent one: the answer says when it left files out.
 */
export const SECRET_REPO_EXCLUDES: readonly string[] = [
  '.env', '.env.*', '*.pem', '*.key', '*.p12', '*.pfx', 'id_rsa*', 'id_dsa*', 'id_ecdsa*', 'id_ed25519*',
  '.ssh/', '.aws/', '.gnupg/', '.docker/config.json', '.npmrc', '.pypirc', '.netrc', '.git-credentials',
];

/** The git metadata: no part of the tree a task reads (not a secret: never reported as one). */
export const VCS_REPO_EXCLUDES: readonly string[] = ['.git/'];

/** The default when a task sets no `repoExclude`: the git metadata and the secrets rule. */
export const DEFAULT_REPO_EXCLUDES: readonly string[] = [...VCS_REPO_EXCLUDES, ...SECRET_REPO_EXCLUDES];

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
  return { negate, dirOnly, re, source: line };
}

export function compileExcludes(patterns: readonly string[]): ExcludeMatcher {
  const rules = patterns.map(compile).filter((r): r is Rule => r !== null);
  const match = (path: string, isDir: boolean): { excluded: boolean; pattern: string } | undefined => {
    for (let i = rules.length - 1; i >= 0; i--) {
      const rule = rules[i]!;
      if (rule.dirOnly && !isDir) continue;
      if (rule.re.test(path)) return { excluded: !rule.negate, pattern: rule.source };
    }
    return undefined;
  };
  return {
    match,
    excludes: (path, isDir) => match(path, isDir)?.excluded ?? false,
  };
}

/**
 * The `.gitignore` files of a checkout, as git reads them: each file's patterns are relative to
 * its own directory, a deeper file's match decides over a shallower one's, and within one file
 * the last match wins. `push` adds the file of a directory as the walk enters it.
 */
export interface GitignoreStack {
  /** A matcher for the directory `dir` ('' for the root) from its `.gitignore` text. */
  push(dir: string, text: string): void;
  ignores(path: string, isDir: boolean): boolean;
}

export function createGitignoreStack(): GitignoreStack {
  const levels: Array<{ dir: string; matcher: ExcludeMatcher }> = [];
  return {
    push(dir, text) {
      levels.push({ dir, matcher: compileExcludes(text.split(/\r?\n/u)) });
      // Deepest first when matching.
      levels.sort((a, b) => b.dir.length - a.dir.length);
    },
    ignores(path, isDir) {
      for (const { dir, matcher } of levels) {
        if (dir !== '' && !path.startsWith(`${dir}/`)) continue;
        const m = matcher.match(dir === '' ? path : path.slice(dir.length + 1), isDir);
        if (m !== undefined) return m.excluded;
      }
      return false;
    },
  };
}
