/**
 * The research tools, over the daemon's research-run API with the session's workspace key:
 * `research_run` creates a durable run (its end then comes as a notification, run-notices.ts),
 * `research_get`, `research_snapshots` and `research_list` read runs back.
 */
import type { z } from 'zod';
import type { FusionClient } from '../client/index.js';
import type { ResearchGetInput, ResearchListInput, ResearchSnapshotsInput } from '../contracts/agent-tools.js';
import { FusionError } from '../errors.js';
import { codeSpan } from '../research/crawl/research-document.js';
import type { DaemonSeamsCheck } from './daemon-seams.js';
import { TERMINAL_RUN, runLine, snapshotsMarkdown } from './research-text.js';
import type { RunNotices } from './run-notices.js';
import { textResult, toolArgs, type ToolHandler } from './tool-call.js';
import type { TOOL_CONTRACTS } from './tool-schemas.js';

export type ResearchToolName = 'research_run' | 'research_get' | 'research_snapshots' | 'research_list';

export function researchToolCalls(deps: {
  client: FusionClient;
  /** Workspace API key (FUSION_RESEARCH_API_KEY); absent → every research tool is refused. */
  researchApiKey: string | undefined;
  checkDaemonSeams: DaemonSeamsCheck;
  runs: RunNotices;
}): Record<ResearchToolName, ToolHandler> {
  const { client } = deps;
  const researchKey = (): string => {
    if (!deps.researchApiKey) {
      throw new FusionError('unauthorized', 'the research tools need a workspace API key: start fusion mcp with FUSION_RESEARCH_API_KEY set; ask the daemon\'s admin for a key (`fusion keys create --workspace ID --kind workspace` on the daemon\'s data directory)');
    }
    return deps.researchApiKey;
  };

  return {
    async research_run(raw) {
      const a = toolArgs<z.infer<(typeof TOOL_CONTRACTS)['research_run']>>('research_run', raw);
      const apiKey = researchKey();
      await deps.checkDaemonSeams('research_run');
      const body = { query: a.query, sourceUrls: a.sourceUrls, ...(a.limits ? { limits: a.limits } : {}) };
      const created = await client.createRun(body, { idempotencyKey: a.idempotencyKey, apiKey });
      const lead = created.deduplicated ? 'This idempotency key already made run' : 'Created research run';
      if (TERMINAL_RUN.has(created.run.status)) {
        // Direct dispatch ends the run inside the create: say how it ended; no notification follows.
        const next = created.run.status === 'succeeded' ? ' Read its document with research_get and its pages with research_snapshots.' : '';
        return textResult(`${lead} ${created.run.id}; it has already ended. ${runLine(created.run)}${next}`, created);
      }
      deps.runs.watch(created.run, apiKey);
      return textResult(`${lead} ${created.run.id} (${created.run.status}). A notification follows when it ends.`, created);
    },
    async research_get(raw) {
      const a = toolArgs<ResearchGetInput>('research_get', raw);
      const apiKey = researchKey();
      const run = await client.getRun(a.runId.trim(), { apiKey });
      const document = a.document !== false && run.status === 'succeeded' ? await client.document(run.id, { apiKey }) : null;
      const skipped = (run.crawl?.skipped ?? []) as Array<{ url: string; reason: string }>;
      const why = document === null && skipped.length > 0 ? `\n\nNot read (${String(skipped.length)}):\n${skipped.map((s) => `- ${codeSpan(s.url)}: ${codeSpan(s.reason)}`).join('\n')}` : '';
      return textResult(document === null ? `${runLine(run)}${why}` : `${runLine(run)}\n\n${document.content}`, { run, document });
    },
    async research_snapshots(raw) {
      const a = toolArgs<ResearchSnapshotsInput>('research_snapshots', raw);
      const id = a.runId.trim();
      const snapshots = await client.snapshots(id, { apiKey: researchKey() });
      const shown = a.content === true ? snapshots : snapshots.map(({ content: _content, ...meta }) => meta);
      return textResult(snapshotsMarkdown(id, shown, a.content === true), { runId: id, snapshots: shown });
    },
    async research_list(raw) {
      const a = toolArgs<ResearchListInput>('research_list', raw);
      const page = await client.listRuns({ apiKey: researchKey(), ...(a.limit === undefined ? {} : { limit: a.limit }), ...(a.cursor === undefined ? {} : { cursor: a.cursor }) });
      const lines = page.runs.map((r) => `- ${runLine(r)}`);
      const more = page.nextCursor === null ? '' : `\n\nMore runs: call research_list with cursor ${JSON.stringify(page.nextCursor)}.`;
      return textResult(`${page.runs.length === 0 ? 'No research runs in this workspace.' : lines.join('\n')}${more}`, page);
    },
  };
}
