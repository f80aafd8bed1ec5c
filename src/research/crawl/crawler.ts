/**
 * Crawl engine entry point. Replaced by the real implementation on the crawl branch; until then
 * it refuses loudly rather than pretending to crawl.
 */
import { FusionError } from '../../errors.js';
import type { Crawler, CrawlerOptions, CrawlOutcome, ResearchDocumentText } from './port.js';
import { RESEARCH_USER_AGENT } from '../../contracts/research-limits.js';

export function createCrawler(options: CrawlerOptions): Crawler {
  const userAgent = options.userAgent ?? RESEARCH_USER_AGENT;
  return {
    userAgent,
    crawl(): Promise<CrawlOutcome> {
      return Promise.reject(new FusionError('internal_error', 'the research crawler is not built into this version'));
    },
  };
}

export function buildResearchDocument(_run: { id: string; query: string }, _outcome: CrawlOutcome): ResearchDocumentText {
  throw new FusionError('internal_error', 'the research crawler is not built into this version');
}
