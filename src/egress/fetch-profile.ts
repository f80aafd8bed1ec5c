/**
 * Per-call profiles of the one guarded fetch. A profile changes what a call accepts and returns
 * (User-Agent, media types, byte and output caps, extraction mode, links), never the address
 * rules: DNS vetting, pinning, redirects and the deadline semantics are the guard's and stay the
 * same for every caller. A call without a profile behaves exactly as the broker's fetch always
 * has.
 *
 * Three profiles exist: `research` (the pages of a crawl) and `research-robots` (a host's
 * robots.txt, same User-Agent) for research runs, and `search` (one JSON answer of a configured
 * web-search provider, its host explicitly allowed, its key in a header; src/search/).
 */
import { FusionError } from '../errors.js';
import { RESEARCH_MEDIA_TYPES, ROBOTS_MAX_BYTES } from '../contracts/research-limits.js';
import type { ExtractMode } from './constants.js';

export interface FetchProfile {
  /** Shown in the guard's log lines. */
  name: string;
  /** Replaces the guard's User-Agent for this call. */
  userAgent?: string;
  /** Replaces the Accept header for this call. */
  accept?: string;
  /**
   * Media types accepted (others fail with `unsupported_content_type`); `any-as-text` accepts
   * any or no Content-Type and reads the body as text/plain (robots.txt is often mislabelled).
   */
  mediaTypes?: ReadonlySet<string> | 'any-as-text';
  /** Raw body cap for this call. */
  maxResponseBytes?: number;
  /**
   * `fail` (default): a body over the cap is `response_too_large`. `cut-at-line`: keep the bytes
   * up to the last line feed within the cap and report `cut: true` (robots.txt: read a prefix,
   * never fail; a line feed never splits a UTF-8 sequence, so the prefix still decodes).
   */
  overflow?: 'fail' | 'cut-at-line';
  /** Extracted output cap for this call (bytes, cut on a code point). */
  maxOutputBytes?: number;
  /** Forces the extraction mode for HTML, whatever the request asked. */
  extract?: ExtractMode;
  /** This call's deadline when shorter than the guard's own (a research run's remaining time). */
  deadlineMs?: number;
  /** Return the absolute http(s) links (<a href>) of an HTML page. */
  links?: boolean;
  /**
   * `follow` (default): redirects are followed inside the call (each hop vetted). `return`: a
   * redirect answer is returned as a result with `redirect` set and no body, for a caller that
   * must judge the target itself (robots.txt, a crawl's limits) before requesting it.
   */
  redirects?: 'follow' | 'return';
  /**
   * Extra request headers of this call (a search provider's key). They may hold a credential, so
   * they are never logged, and the guard refuses them unless `redirects` is `return` and
   * `allowHosts` is set: a credential goes to the allowed hosts only, never to a redirect target.
   */
  headers?: Readonly<Record<string, string>>;
  /**
   * Hosts this call may reach (lowercase names or IP literals, as the URL's host). Any other
   * host is refused before DNS, as a policy block (`blocked_address`). The address rules still
   * apply to an allowed host.
   */
  allowHosts?: ReadonlySet<string>;
}

/** Accept header of the research profile: the page types a research crawl keeps (RESEARCH_MEDIA_TYPES), no Markdown. */
export const RESEARCH_ACCEPT_HEADER = 'text/html, application/xhtml+xml;q=0.9, text/plain;q=0.8';

/**
 * Snapshot text cap of the research profile (UTF-8 bytes of extracted text). Larger than the
 * broker's 32 KiB because a snapshot is the stored copy of a page, not a model tool result; a
 * 2 MiB page rarely yields more text than this.
 */
export const RESEARCH_SNAPSHOT_MAX_BYTES = 512 * 1024;

/** Links returned per HTML page at most (a crawl follows at most 20 pages anyway). */
export const MAX_LINKS_PER_PAGE = 2000;

export interface ResearchProfileOptions {
  userAgent: string;
  /** The run's maxBytesPerPage (or less, when the run's total byte budget is nearly spent). */
  maxResponseBytes: number;
  /** The run's remaining time. */
  deadlineMs: number;
}

/** A remaining time (fractional ms from performance.now()) as the guard's whole, positive deadline. */
function wholeMs(ms: number): number {
  return Math.max(1, Math.ceil(ms));
}

export function researchPageProfile(options: ResearchProfileOptions): FetchProfile {
  return {
    name: 'research',
    userAgent: options.userAgent,
    accept: RESEARCH_ACCEPT_HEADER,
    mediaTypes: RESEARCH_MEDIA_TYPES,
    maxResponseBytes: options.maxResponseBytes,
    overflow: 'fail',
    maxOutputBytes: RESEARCH_SNAPSHOT_MAX_BYTES,
    extract: 'text',
    deadlineMs: wholeMs(options.deadlineMs),
    links: true,
    redirects: 'return',
  };
}

export function researchRobotsProfile(options: { userAgent: string; deadlineMs: number }): FetchProfile {
  return {
    name: 'research-robots',
    userAgent: options.userAgent,
    accept: 'text/plain',
    mediaTypes: 'any-as-text',
    maxResponseBytes: ROBOTS_MAX_BYTES,
    overflow: 'cut-at-line',
    maxOutputBytes: ROBOTS_MAX_BYTES,
    extract: 'text',
    deadlineMs: wholeMs(options.deadlineMs),
    links: false,
  };
}

/** The JSON answer of a search provider: at most 2 MiB, read whole (never cut), never followed elsewhere. */
export const SEARCH_MAX_RESPONSE_BYTES = 2 * 1024 * 1024;

export interface SearchProfileOptions {
  /** The provider's name, shown in the guard's log lines as `search-<provider>`. */
  provider: string;
  /** The provider's host(s): the only hosts the call may reach. */
  allowHosts: ReadonlySet<string>;
  /** The provider's request headers (its key); never logged. */
  headers: Readonly<Record<string, string>>;
  deadlineMs: number;
}

export function searchProfile(options: SearchProfileOptions): FetchProfile {
  return {
    name: `search-${options.provider}`,
    accept: 'application/json',
    mediaTypes: new Set(['application/json']),
    maxResponseBytes: SEARCH_MAX_RESPONSE_BYTES,
    overflow: 'fail',
    // The JSON is parsed whole: an output cap below the body cap would cut it into malformed JSON.
    maxOutputBytes: SEARCH_MAX_RESPONSE_BYTES * 4,
    extract: 'text',
    deadlineMs: wholeMs(options.deadlineMs),
    links: false,
    // A redirect is returned, never followed: the provider's key must not travel to its target.
    redirects: 'return',
    headers: options.headers,
    allowHosts: options.allowHosts,
  };
}

/** A User-Agent must be one non-empty line (it becomes a request header). */
export function checkUserAgent(userAgent: string, path: string): string {
  if (/[\r\n\0]/u.test(userAgent) || userAgent.trim() === '') {
    throw new FusionError('invalid_config', 'userAgent must be a non-empty single line', { details: { path } });
  }
  return userAgent;
}
