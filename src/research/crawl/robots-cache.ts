/**
 * robots.txt of each origin (scheme, host, port) a crawl touches: fetched at most once per run,
 * through the same guard and User-Agent as the pages (profile `research-robots`: any media type
 * read as text, the first ROBOTS_MAX_BYTES kept, never a failure for size).
 *
 * The usual crawler convention for a robots.txt that cannot be read:
 * - 2xx: the rules apply (`ok`);
 * - 4xx (including 401/403/404/429): no robots.txt, everything allowed (`missing`);
 * - 5xx, network errors, timeouts, too many redirects, a redirect the guard refuses: the host
 *   may be overloaded or hiding its rules, so nothing is fetched from it (`failed`).
 * A refusal of the origin itself by egress policy (`invalid_url`, `unsupported_scheme`,
 * `blocked_address`) is not a robots outcome: it is rethrown so the crawl treats the page the
 * same way (a source URL refused by policy fails the run). So is an abort, and any error that is
 * not an egress failure (a bug or a bad configuration must not pass for an unreachable host).
 */
import type { Logger } from '../../log.js';
import { FusionError, isFusionError, toFusionError } from '../../errors.js';
import { EGRESS_CODES, type GuardedFetch } from '../../egress/guarded-fetch.js';
import { researchRobotsProfile } from '../../egress/fetch-profile.js';
import { parseRobots, type RobotsRules } from './robots.js';
import type { RobotsNote } from './port.js';

export interface RobotsEntry {
  note: RobotsNote;
  /** Undefined when `failed`: nothing is allowed. */
  rules: RobotsRules | undefined;
  /** When `failed`: why, as the error a run that collected nothing fails with. */
  error?: FusionError;
}

/** Codes that refuse the origin itself on the first hop. */
const ORIGIN_REFUSED = new Set(['invalid_url', 'unsupported_scheme', 'blocked_address']);

export interface RobotsCacheOptions {
  fetch: GuardedFetch;
  userAgent: string;
  log: Logger;
  /** Remaining run time, in ms, at the moment of a fetch. */
  remainingMs: () => number;
  signal: AbortSignal;
}

export class RobotsCache {
  private readonly entries = new Map<string, Promise<RobotsEntry>>();

  constructor(private readonly options: RobotsCacheOptions) {}

  /** One note per origin asked for, in first-asked order (completed lookups only). */
  async notes(): Promise<RobotsNote[]> {
    const settled = await Promise.allSettled(this.entries.values());
    return settled.flatMap((entry) => (entry.status === 'fulfilled' ? [entry.value.note] : []));
  }

  /** Origins whose robots.txt was asked for (each costs one request). */
  get size(): number {
    return this.entries.size;
  }

  has(origin: string): boolean {
    return this.entries.has(origin);
  }

  /** The origin's rules; rejects with the guard's error when the origin is refused by policy or the run was aborted. */
  get(origin: string): Promise<RobotsEntry> {
    let entry = this.entries.get(origin);
    if (entry === undefined) {
      entry = this.load(origin);
      this.entries.set(origin, entry);
    }
    return entry;
  }

  private async load(origin: string): Promise<RobotsEntry> {
    const { fetch, userAgent, log, signal } = this.options;
    const url = `${origin}/robots.txt`;
    try {
      const result = await fetch({ url, profile: researchRobotsProfile({ userAgent, deadlineMs: this.options.remainingMs() }) }, signal);
      const rules = parseRobots(result.content, userAgent);
      const detail = `HTTP ${String(result.status)}, ${String(rules.rules.length)} rules for ${rules.group === 'agent' ? 'our user agent' : rules.group === 'star' ? '*' : 'no group'}${result.cut === true ? ', cut at the read limit' : ''}`;
      log.info({ origin, robots: 'ok', rules: rules.rules.length, group: rules.group, cut: result.cut === true }, 'research robots.txt');
      return { note: { host: origin, status: 'ok', detail }, rules };
    } catch (err) {
      const error: FusionError = toFusionError(err, 'network_error');
      if (signal.aborted || ORIGIN_REFUSED.has(error.code) || !EGRESS_CODES.has(error.code)) throw error;
      const status = error.details.http_status;
      if (isFusionError(error) && error.code === 'http_error' && typeof status === 'number' && status >= 400 && status < 500) {
        log.info({ origin, robots: 'missing', httpStatus: status }, 'research robots.txt');
        return { note: { host: origin, status: 'missing', detail: `HTTP ${String(status)}: everything allowed` }, rules: { rules: [], group: 'none' } };
      }
      log.info({ origin, robots: 'failed', code: error.code, err: error }, 'research robots.txt');
      return {
        note: { host: origin, status: 'failed', detail: `${error.code}: ${error.message}; nothing fetched from this host` },
        rules: undefined,
        error: new FusionError(error.code, `robots.txt of ${origin} could not be read (${error.message}), so nothing was fetched from that host`, { cause: error, details: { ...error.details } }),
      };
    }
  }
}
