/**
 * Which repository a task tool runs over. One server can serve several repositories: a task
 * tool's optional `repo` must resolve (symlinks followed) inside a root the server was started
 * with, so an agent cannot point the daemon at a directory the person who configured the server
 * did not offer. Without `repo` the tool runs over the server's own repository.
 */
import { realpathSync } from 'node:fs';
import { isAbsolute, relative, resolve as resolvePath } from 'node:path';
import { FusionError } from '../errors.js';

/** The repository a task tool names, and its arguments without `repo` (the daemon's contract has none). */
export type RepoResolver = (tool: string, raw: unknown) => { repo: string; rest: unknown };

/**
 * `repo`: the repository of a task tool called without `repo`, always allowed; `roots`: the
 * directories (real paths) a named `repo` may lie in.
 */
export function repoResolver(repo: string, roots: readonly string[]): RepoResolver {
  return (name, raw) => {
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw) || !Object.hasOwn(raw, 'repo')) return { repo, rest: raw };
    const { repo: asked, ...rest } = raw as Record<string, unknown>;
    if (typeof asked !== 'string' || !isAbsolute(asked)) {
      throw new FusionError('invalid_input', `${name}.repo must be an absolute path to a repository inside the server's roots`, { details: { tool: name, field: 'repo' } });
    }
    let real: string;
    try {
      real = realpathSync(asked);
    } catch (err) {
      throw new FusionError('invalid_input', `${name}.repo ${asked.slice(0, 300)} is not a readable directory (${(err as NodeJS.ErrnoException).code ?? 'error'})`, { details: { tool: name, field: 'repo' } });
    }
    const inside = (root: string): boolean => {
      const rel = relative(root, real);
      return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
    };
    if (real !== resolvePath(repo) && !roots.some(inside)) {
      const offered = roots.length > 0 ? `the roots ${roots.join(', ')}` : `only its repository ${repo}`;
      throw new FusionError('invalid_input', `${name}.repo ${asked.slice(0, 300)} is outside what this MCP server was started with (${offered}); start fusion mcp with --root for that directory`, {
        details: { tool: name, field: 'repo', roots: roots.length > 0 ? roots : [repo] },
      });
    }
    return { repo: real, rest };
  };
}
