/**
 * research_run's crawl and fusion_research's source fetches happen in the daemon, not in this
 * process: the egress seams `fusion mcp` was started with (--resolve/--allow-cidr) must be the
 * daemon's too, or the call is refused up front (without them every source would end as a
 * dns_failure in a task that still "succeeds"). web_read, web_crawl and web_search run here and
 * use this process's seams.
 */
import type { FusionClient } from '../client/index.js';
import { FusionError } from '../errors.js';

export interface EgressSeams {
  resolve: readonly string[];
  allowCidrs: readonly string[];
}

/** Throws `invalid_config` when the daemon lacks a seam of this server's; `tool` names the refused call. */
export type DaemonSeamsCheck = (tool: 'research_run' | 'fusion_research') => Promise<void>;

/** Seams `fusion mcp` has that the daemon's health does not list (all of them when the daemon does not say). */
function seamsMissing(seams: EgressSeams, health: Record<string, unknown>): string[] {
  const egress = health.egress as { resolve?: unknown; allowCidrs?: unknown } | undefined;
  const has = (list: unknown, item: string): boolean => Array.isArray(list) && list.some((x) => typeof x === 'string' && x.trim() === item.trim());
  return [
    ...seams.resolve.filter((r) => !has(egress?.resolve, r)).map((r) => `--resolve ${r}`),
    ...seams.allowCidrs.filter((c) => !has(egress?.allowCidrs, c)).map((c) => `--allow-cidr ${c}`),
  ];
}

/**
 * The seams of `seams` that the running daemon `client` talks to lacks, and whether it shows its
 * egress settings to this caller at all (a non-privileged caller is not shown them).
 */
export async function daemonSeamsMissing(client: FusionClient, seams: EgressSeams): Promise<{ missing: string[]; shown: boolean }> {
  const health = (await client.health()) as unknown as Record<string, unknown>;
  return { missing: seamsMissing(seams, health), shown: health.egress !== undefined };
}

export function daemonSeamsCheck(client: FusionClient, seams: EgressSeams | undefined): DaemonSeamsCheck {
  return async (tool) => {
    if (seams === undefined || (seams.resolve.length === 0 && seams.allowCidrs.length === 0)) return;
    // A daemon this session started was given the same seams.
    if ((await client.connect()).embedded) return;
    const { missing, shown } = await daemonSeamsMissing(client, seams);
    if (missing.length === 0) return;
    throw new FusionError(
      'invalid_config',
      `${tool}: fusion mcp was started with ${missing.join(', ')}, but ${tool === 'research_run' ? 'research runs are crawled' : "fusion_research's sources are fetched"} by the daemon at ${client.describe()}, which ${shown ? 'does not have them' : 'does not show its egress settings to this user'}: start that daemon with the same flags, or run fusion mcp with no daemon running (it then starts its own with them). web_read, web_crawl and web_search use fusion mcp's seams.`,
      { details: { missing } },
    );
  };
}
