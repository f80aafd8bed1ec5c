/**
 * Crawl engine entry point: what the research-run service constructs once per daemon with the
 * daemon's one guarded fetch. Each crawl is a crawl-run.ts run; the document builder is
 * research-document.ts.
 */
import { RESEARCH_USER_AGENT } from '../../contracts/research-limits.js';
import { checkUserAgent } from '../../egress/fetch-profile.js';
import { runCrawl, sourceRefusal } from './crawl-run.js';
import type { Crawler, CrawlerOptions } from './port.js';

export { buildResearchDocument } from './research-document.js';

export function createCrawler(options: CrawlerOptions): Crawler {
  const userAgent = checkUserAgent(options.userAgent ?? RESEARCH_USER_AGENT, 'userAgent');
  const log = options.log.child({ component: 'research-crawl' });
  return {
    userAgent,
    crawl: (request, signal) => runCrawl(request, signal, { fetch: options.fetch, userAgent, log }),
    sourceRefusal: (sourceUrls) => sourceRefusal(sourceUrls, options.fetch),
  };
}
