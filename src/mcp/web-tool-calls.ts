/**
 * The web tools' `tools/call` handlers: `web_read`, `web_crawl` and `web_search` run in this
 * process through the egress guard (web-tools.ts), and nothing is stored.
 */
import type { z } from 'zod';
import { textResult, toolArgs, type ToolHandler } from './tool-call.js';
import type { TOOL_CONTRACTS } from './tool-schemas.js';
import type { WebTools } from './web-tools.js';

export type WebToolName = 'web_read' | 'web_crawl' | 'web_search';

export function webToolCalls(web: WebTools): Record<WebToolName, ToolHandler> {
  return {
    async web_read(raw, { signal }) {
      const page = await web.read(toolArgs<{ url: string }>('web_read', raw).url, signal);
      return textResult(page.markdown, page, !page.read);
    },
    async web_crawl(raw, { signal }) {
      const crawl = await web.crawl(toolArgs<z.infer<(typeof TOOL_CONTRACTS)['web_crawl']>>('web_crawl', raw), signal);
      return textResult(crawl.markdown, crawl);
    },
    async web_search(raw, { signal }) {
      // Results go back to the agent only: which of them to read or research is its call.
      const found = await web.search(toolArgs<z.infer<(typeof TOOL_CONTRACTS)['web_search']>>('web_search', raw), signal);
      return textResult(found.markdown, found);
    },
  };
}
