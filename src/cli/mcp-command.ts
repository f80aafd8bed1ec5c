/**
 * `fusion mcp [--repo DIR] [--root DIR]… [--socket PATH] [--resolve HOST:IP]… [--allow-cidr CIDR]…`:
 * the MCP stdio server. Uses the daemon on the socket, or starts an embedded one when none answers.
 * A task tool's optional `repo` argument must lie inside one of the `--root` directories (or be
 * the `--repo` default, which is the first root when only roots are given).
 * research_run authenticates with FUSION_RESEARCH_API_KEY (an environment variable rather than a
 * flag, so the key never shows in process listings or client configuration arguments).
 * web_search asks the provider of FUSION_SEARCH_PROVIDER/_URL/_ALLOW_HOSTS with FUSION_SEARCH_API_KEY
 * (environment only, like the research key). web_read/web_crawl/web_search use this process's egress guard with the same admin seams as the daemon's
 * (flags or FUSION_EGRESS_RESOLVE / FUSION_EGRESS_ALLOW_CIDRS).
 */
import { realpathSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { FusionError } from '../errors.js';
import { createLogger } from '../log.js';
import { packageVersion } from '../common/package-version.js';
import { FusionClient } from '../client/index.js';
import { daemonConfigInput, resolveSocket, type Env } from '../config/settings.js';
import { flag, flagAll, type ParsedArgs } from '../config/args.js';
import { serveMcp } from '../mcp/server.js';
import { createWebTools } from '../mcp/web-tools.js';
import { positiveInt } from '../maintenance/config.js';
import { searchConfigFrom } from '../search/search-config.js';

/** A root as the server compares paths: absolute and with its symlinks resolved. */
function realRoot(dir: string): string {
  try {
    return realpathSync(resolvePath(dir));
  } catch (err) {
    throw new FusionError('invalid_config', `--root ${dir} is not a readable directory (${(err as NodeJS.ErrnoException).code ?? 'error'}): pass an existing repository or a directory holding repositories`, { details: { field: 'root' } });
  }
}

export async function runMcpCommand(args: ParsedArgs, env: Env): Promise<number> {
  const daemonInput = daemonConfigInput(args, env);
  const roots = flagAll(args, 'root').map(realRoot);
  const repoFlag = flag(args, 'repo');
  const repo = repoFlag !== undefined ? resolvePath(repoFlag) : (roots[0] ?? process.cwd());
  // Parsed before anything starts: a bad value is invalid_config, not a session that dies later.
  const maxBytes = env.FUSION_MCP_MAX_MESSAGE_BYTES?.trim();
  const limit = maxBytes !== undefined && maxBytes !== '' ? { maxMessageBytes: positiveInt('FUSION_MCP_MAX_MESSAGE_BYTES', maxBytes) } : {};
  // stdout carries the protocol: the embedded daemon and the guard log to stderr only.
  // A bad search setting fails here, before the session starts (FUSION_SEARCH_*).
  const search = searchConfigFrom(env);
  const client = new FusionClient({ socketPath: resolveSocket(args, env), env, embedded: daemonInput });
  const web = createWebTools({ log: createLogger({ level: (env.FUSION_LOG_LEVEL as 'warn' | undefined) ?? 'warn' }), resolve: daemonInput.egressResolve ?? [], allowCidrs: daemonInput.egressAllowCidrs ?? [], search });
  try {
    await client.connect();
    const apiKey = env.FUSION_RESEARCH_API_KEY?.trim();
    await serveMcp({
      client,
      web,
      repo,
      roots,
      egressSeams: { resolve: daemonInput.egressResolve ?? [], allowCidrs: daemonInput.egressAllowCidrs ?? [] },
      version: packageVersion(),
      input: process.stdin,
      output: process.stdout,
      ...(apiKey ? { researchApiKey: apiKey } : {}),
      ...limit,
    });
  } finally {
    await web.close();
    await client.close();
  }
  return 0;
}
