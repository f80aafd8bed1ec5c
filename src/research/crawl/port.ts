/**
 * The crawler port: what the research-run service (src/research/) asks of the crawl engine
 * (src/research/crawl/). The service owns runs, storage, dispatch and auth; the crawler owns
 * fetching (through the one egress guard, profile `research`), robots.txt, canonical URLs,
 * link following within the limits, and turning pages into snapshot text.
 */
import type { Logger } from '../../log.js';
import type { FusionError } from '../../errors.js';
import type { GuardedFetch } from '../../egress/guarded-fetch.js';
import type { ResearchLimits } from '../../contracts/research-limits.js';
import type { CrawlSkip, ResearchSnapshotView, RobotsNote } from '../../contracts/research.js';

/** The crawl's notes are research-contract types (the store records them too). */
export type { CrawlSkip, RobotsNote };

export interface CrawlRequest {
  runId: string;
  query: string;
  /** As given by the caller (already validated as http(s) URLs by the create contract). */
  sourceUrls: readonly string[];
  /** Complete: the service fills omitted keys with the defaults before calling. */
  limits: ResearchLimits;
}

/**
 * A collected page (the stored snapshot shape): `bytes` and `sha256` describe the raw body,
 * `content` is the extracted text and begins with UNTRUSTED_CAUTION.
 */
export interface CrawlSnapshot extends ResearchSnapshotView {
  /** Link distance from a source URL (sources are 0). */
  depth?: number;
  /** True when the extracted text was cut at the snapshot text cap. */
  truncated?: boolean;
}

export interface CrawlOutcome {
  snapshots: CrawlSnapshot[];
  skipped: CrawlSkip[];
  robots: RobotsNote[];
  /** The User-Agent every request of this crawl carried. */
  userAgent: string;
  /** Skips beyond the listed ones (the list is bounded); absent or 0 when all are listed. */
  skippedOmitted?: number;
  /** Why the crawl stopped before its queue was empty (a limit), if it did. */
  stoppedBy?: string;
}

export interface Crawler {
  readonly userAgent: string;
  /**
   * Resolves with what was collected. Rejects with a FusionError when the run must fail: an
   * egress policy refusal of a source URL (its egress code and message), `cancelled` when
   * `signal` aborts, or the first error when no source yielded anything.
   */
  crawl(request: CrawlRequest, signal: AbortSignal): Promise<CrawlOutcome>;
  /**
   * The error `crawl` would reject with for these sources before sending any request (a source
   * the egress policy refuses on its own: shape, blocked name, private literal), else undefined.
   */
  sourceRefusal?(sourceUrls: readonly string[]): FusionError | undefined;
}

export interface CrawlerOptions {
  log: Logger;
  /** The daemon's one guard (its admin seams apply); the crawler passes the research profile per call. */
  fetch: GuardedFetch;
  /** Default RESEARCH_USER_AGENT. */
  userAgent?: string;
}

export interface ResearchDocumentText {
  /** `Research - {query cut to 120}.md` */
  name: string;
  /** Markdown beginning with UNTRUSTED_CAUTION, linking every snapshot by canonical URL. */
  content: string;
}
