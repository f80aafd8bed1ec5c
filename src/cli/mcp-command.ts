/**
 * `fusion mcp [--repo DIR] [--socket PATH] [--resolve HOST:IP]… [--allow-cidr CIDR]…`: the MCP
 * stdio server. Uses the daemon on the socket, or starts an embedded one when none answers.
 * research_run authenticates with FUSION_RESEARCH_API_KEY (an environment variable rather than a
 * flag, so the key never shows in process listings or client configuration arguments).
 * web_search asks the provider of FUSION_SEARCH_PROVIDER/_URL/_ALLOW_HOSTS with FUSION_SEARCH_API_KEY
 * (environment only, like the research key). web_read/web_crawl/web_search use this process's egress guard with the same admin seams as the daemon's
 * (flags or FUSION_EGRESS_RESOLVE / FUSION_EGRESS_ALLOW_CIDRS).
 */
import { resolve as resolvePath } from 'node:path';
import { createLogger } from '../log.js';
import { packageVersion } from '../common/package-version.js';
import { FusionClient } from '../client/index.js';
import { daemonConfigInput, resolveSocket, type Env } from '../config/settings.js';
import { flag, type ParsedArgs } from '../config/args.js';
import { serveMcp } from '../mcp/server.js';
import { createWebTools } from '../mcp/web-tools.js';
import { positiveInt } from '../maintenance/config.js';
import { searchConfigFrom } from '../search/search-config.js';

export async function runMcpCommand(args: ParsedArgs, env: Env): Promise<number> {
  const daemonInput = daemonConfigInput(args, env);
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
      repo: resolvePath(flag(args, 'repo') ?? process.cwd()),
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
