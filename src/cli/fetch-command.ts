/**
 * `fusion fetch URL [--extract text|markdown] [--json] [--resolve HOST:IP]… [--allow-cidr CIDR]…`
 *
 * Runs one guarded fetch (docs/behaviour.md#e3) in this process, through exactly the guard the broker uses,
 * so an admin can see what a research candidate would get for a URL and why a URL is refused.
 * Output: the extracted content on stdout (`--json`: the whole result object); on failure
 * `fusion fetch: <code>: <message>` on stderr (`--json`: `{"error":{code,message,details}}` on
 * stdout). `--resolve`/`--allow-cidr` are the guard's admin seams; using them prints the guard's
 * warning on stderr.
 *
 * Exit codes: 0 success; 2 usage error (bad flag value, bad --resolve/--allow-cidr entry);
 * 3 refused by policy (blocked_address, redirect_blocked, unsupported_scheme); 4 any other fetch
 * failure (invalid_url, dns_failure, http_error, timeouts, …).
 */
import { parseCidrList } from '../contracts/address-class.js';
import { FusionError, toFusionError, type ErrorCode } from '../errors.js';
import { createLogger } from '../log.js';
import { createGuardedFetch, type GuardedFetch } from '../egress/guarded-fetch.js';
import { parseResolveList } from '../egress/resolve-list.js';
import { flag, flagAll, has, usageError, type FlagSpec, type ParsedArgs } from '../config/args.js';
import { flagSpecFor } from '../config/options.js';

export interface FetchCommandArgs {
  url: string;
  extract?: 'text' | 'markdown';
  json: boolean;
  resolve: string[];
  allowCidrs: string[];
}

export interface FetchCommandIo {
  stdout(text: string): void;
  stderr(text: string): void;
}

/** Flags of `fusion fetch`, for the CLI's argv parser. */
export const FETCH_FLAGS: Record<string, FlagSpec> = flagSpecFor('fetch');

/** Codes that mean the egress policy refused the URL (exit 3). */
const POLICY_REFUSALS: ReadonlySet<ErrorCode> = new Set(['blocked_address', 'redirect_blocked', 'unsupported_scheme']);
const USAGE_CODES: ReadonlySet<ErrorCode> = new Set(['invalid_input', 'invalid_config']);

export function fetchExitCode(code: ErrorCode): number {
  if (USAGE_CODES.has(code)) return 2;
  if (POLICY_REFUSALS.has(code)) return 3;
  return 4;
}

/** Builds the command's arguments from parsed argv; throws a usage error (exit 2). */
export function fetchArgsFrom(args: ParsedArgs): FetchCommandArgs {
  if (args.positionals.length !== 1 || args.positionals[0] === undefined) throw usageError('fetch needs exactly one URL');
  const extract = flag(args, 'extract');
  if (extract !== undefined && extract !== 'text' && extract !== 'markdown') throw usageError('--extract must be text or markdown');
  return {
    url: args.positionals[0],
    ...(extract === undefined ? {} : { extract }),
    json: has(args, 'json'),
    resolve: flagAll(args, 'resolve'),
    allowCidrs: flagAll(args, 'allow-cidr'),
  };
}

export async function fetchCommand(args: FetchCommandArgs, io: FetchCommandIo): Promise<number> {
  let fetcher: GuardedFetch | undefined;
  try {
    if (typeof args.url !== 'string' || args.url.trim() === '') throw usageError('fetch needs a URL');
    if (args.extract !== undefined && args.extract !== 'text' && args.extract !== 'markdown') throw usageError('--extract must be text or markdown');
    const resolveOverrides = parseResolveList(args.resolve, '--resolve');
    parseCidrList(args.allowCidrs, '--allow-cidr');
    // Warnings only: the guard's admin-seam warning must reach the operator; decisions stay quiet.
    const log = createLogger({ level: 'warn', destination: { write: (line: string) => io.stderr(line) } });
    fetcher = createGuardedFetch({ log, resolveOverrides, allowCidrs: args.allowCidrs });
    const result = await fetcher({ url: args.url, ...(args.extract === undefined ? {} : { extract: args.extract }) });
    if (args.json) {
      io.stdout(`${JSON.stringify(result, null, 2)}\n`);
    } else {
      io.stdout(result.content.endsWith('\n') || result.content === '' ? result.content : `${result.content}\n`);
      if (result.truncated) io.stderr(`fusion fetch: output truncated to ${String(Buffer.byteLength(result.content))} bytes\n`);
    }
    return 0;
  } catch (err) {
    const error = err instanceof FusionError ? err : toFusionError(err, 'internal_error');
    if (args.json) io.stdout(`${JSON.stringify(error.toEnvelope(), null, 2)}\n`);
    else io.stderr(`fusion fetch: ${error.code}: ${error.message}\n`);
    return fetchExitCode(error.code);
  } finally {
    await fetcher?.close();
  }
}
