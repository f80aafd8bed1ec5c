/**
 * `fusion search QUERY… [--count N] [--json] [--resolve HOST:IP]… [--allow-cidr CIDR]…`
 *
 * One web search through the configured provider (FUSION_SEARCH_PROVIDER, FUSION_SEARCH_URL,
 * FUSION_SEARCH_ALLOW_HOSTS, FUSION_SEARCH_API_KEY; docs/behaviour.md#g14), in this process,
 * through the egress guard with the same admin seams as `fusion fetch`. Output: the results as
 * Markdown headed by the untrusted-content caution (`--json`: the results object); nothing is
 * fetched. On failure `fusion search: <code>: <message>` on stderr (`--json`: the error envelope
 * on stdout).
 *
 * `fusion research --from-search QUERY` uses the same search to fill the research sources, and
 * only with `--yes` (searchSources below).
 *
 * Exit codes as `fusion fetch`: 0 success; 2 usage or configuration; 3 refused by policy (a
 * provider host outside the allow list, a blocked address); 4 any other failure.
 */
import { parseCidrList } from '../contracts/address-class.js';
import { FusionError, toFusionError } from '../errors.js';
import { createLogger } from '../log.js';
import { createWebTools, searchMarkdown, type WebSearchReply } from '../mcp/web-tools.js';
import { searchConfigFrom, type SearchEnv } from '../search/search-config.js';
import { checkSearchCount, checkSearchQuery } from '../search/web-search.js';
import { flag, flagAll, has, usageError, type FlagSpec, type ParsedArgs } from '../config/args.js';
import { flagSpecFor } from '../config/options.js';
import { fetchExitCode, type FetchCommandIo } from './fetch-command.js';
import type { SourceArg } from './sources.js';

export const SEARCH_FLAGS: Record<string, FlagSpec> = flagSpecFor('search');

export interface SearchSeams {
  resolve: string[];
  allowCidrs: string[];
}

function csv(value: string | undefined): string[] {
  return (value ?? '').split(',').map((x) => x.trim()).filter(Boolean);
}

/** The admin seams from flags and the environment, as `fusion fetch` takes them. */
export function seamsFrom(args: ParsedArgs, env: SearchEnv): SearchSeams {
  const resolve = [...csv(env.FUSION_EGRESS_RESOLVE), ...flagAll(args, 'resolve')];
  const allowCidrs = [...csv(env.FUSION_EGRESS_ALLOW_CIDRS), ...flagAll(args, 'allow-cidr')];
  parseCidrList(allowCidrs, '--allow-cidr');
  return { resolve, allowCidrs };
}

export function countFrom(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,3}$/u.test(value)) throw usageError(`${name} must be a whole number from 1 to 20`);
  return checkSearchCount(Number(value), name);
}

/** Runs one search in this process; the guard (and its workers) is closed before returning. */
export async function runSearch(query: string, count: number | undefined, seams: SearchSeams, env: SearchEnv, io: FetchCommandIo): Promise<WebSearchReply> {
  const search = searchConfigFrom(env);
  // Warnings only: the guard's admin-seam warning reaches the operator; decisions stay quiet.
  const log = createLogger({ level: 'warn', destination: { write: (line: string) => io.stderr(line) } });
  const web = createWebTools({ log, resolve: seams.resolve, allowCidrs: seams.allowCidrs, search });
  try {
    return await web.search({ query, ...(count === undefined ? {} : { count }) });
  } finally {
    await web.close();
  }
}

export async function searchCommand(args: ParsedArgs, env: SearchEnv, io: FetchCommandIo): Promise<number> {
  const json = has(args, 'json');
  try {
    if (args.positionals.length === 0) throw usageError('search needs a query: fusion search WORDS…');
    const query = checkSearchQuery(args.positionals.join(' '), 'QUERY');
    const count = countFrom(flag(args, 'count'), '--count');
    const reply = await runSearch(query, count, seamsFrom(args, env), env, io);
    if (json) {
      const { markdown: _markdown, ...outcome } = reply;
      io.stdout(`${JSON.stringify(outcome, null, 2)}\n`);
    } else {
      io.stdout(reply.markdown);
    }
    return 0;
  } catch (err) {
    const error = err instanceof FusionError ? err : toFusionError(err, 'internal_error');
    if (json) io.stdout(`${JSON.stringify(error.toEnvelope(), null, 2)}\n`);
    else io.stderr(`fusion search: ${error.code}: ${error.message}\n`);
    return error.code === 'search_unavailable' ? 2 : fetchExitCode(error.code);
  }
}

/**
 * `fusion research --from-search QUERY`: the fetchable results as research sources. Without
 * `--yes` the results are listed and nothing is submitted (a usage error says how to confirm):
 * search results are untrusted, and the caller chooses to let the candidates fetch them.
 */
export async function searchSources(args: ParsedArgs, env: SearchEnv, io: FetchCommandIo): Promise<SourceArg[]> {
  const query = checkSearchQuery(flag(args, 'from-search'), '--from-search');
  const count = countFrom(flag(args, 'search-count'), '--search-count');
  const reply = await runSearch(query, count, seamsFrom(args, env), env, io);
  const usable = reply.results.filter((r) => r.fetchable && r.canonicalUrl !== null);
  io.stderr(searchMarkdown(reply));
  if (usable.length === 0) throw usageError(`the search for ${JSON.stringify(query)} found no fetchable URL; nothing was submitted`);
  if (!has(args, 'yes')) {
    throw usageError(`nothing was submitted: re-run with --yes to use these ${String(usable.length)} search result URL(s) as research sources`);
  }
  return usable.map((r) => ({ url: r.canonicalUrl!, purpose: `web search result ${String(r.rank)} for ${JSON.stringify(query)}${r.title ? `: ${r.title}` : ''}` }));
}
