/**
 * The research-run HTTP contract: the closed create body, and the views the routes return.
 * Limits, maxima and the caution text live in research-limits.ts (shared with the crawler).
 */
import { z } from 'zod';
import { RESEARCH_LIMIT_DEFAULTS, RESEARCH_LIMIT_MAXIMA, type ResearchLimitName, type ResearchLimits } from './research-limits.js';

export const RESEARCH_QUERY_MAX_CHARS = 2000;
export const RESEARCH_MAX_SOURCE_URLS = 20;

/** An absolute http:// or https:// URL (egress policy is the crawler's business, at run time). */
const HttpUrlSchema = z.string().refine(
  (value) => {
    try {
      const url = new URL(value);
      return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
    } catch {
      return false;
    }
  },
  { message: 'must be an absolute http:// or https:// URL' },
);

function limitSchema(name: ResearchLimitName): z.ZodOptional<z.ZodNumber> {
  // Depth 0 is meaningful (fetch the sources only); every other limit needs at least 1.
  const min = name === 'maxDepth' ? 0 : 1;
  return z.number().int().min(min).max(RESEARCH_LIMIT_MAXIMA[name]).optional();
}

// The keys come from the one limits table (RESEARCH_LIMIT_MAXIMA), in its order: a new limit is
// added there only.
const LIMIT_NAMES = Object.keys(RESEARCH_LIMIT_MAXIMA) as ResearchLimitName[];

export const ResearchLimitsInputSchema = z
  .object(Object.fromEntries(LIMIT_NAMES.map((name) => [name, limitSchema(name)])) as Record<ResearchLimitName, z.ZodOptional<z.ZodNumber>>)
  .strict();

export const ResearchCreateBodySchema = z
  .object({
    query: z.string().trim().min(1).max(RESEARCH_QUERY_MAX_CHARS),
    sourceUrls: z.array(HttpUrlSchema).min(1).max(RESEARCH_MAX_SOURCE_URLS),
    limits: ResearchLimitsInputSchema.optional(),
  })
  .strict();

export type ResearchCreateBody = z.infer<typeof ResearchCreateBodySchema>;

/** What a run is defined by; two creates with the same key must agree on all of it. */
export interface ResearchPayload {
  query: string;
  sourceUrls: string[];
  limits: ResearchLimits;
}

/**
 * The normalised payload: query trimmed (by the schema), URLs in their WHATWG serialisation,
 * every limit present (omitted keys take the defaults), so `{}` and the explicit defaults agree.
 */
export function normalisePayload(body: ResearchCreateBody): ResearchPayload {
  return {
    query: body.query,
    sourceUrls: body.sourceUrls.map((u) => new URL(u).href),
    limits: { ...RESEARCH_LIMIT_DEFAULTS, ...stripUndefined(body.limits ?? {}) },
  };
}

function stripUndefined(limits: Partial<Record<ResearchLimitName, number | undefined>>): Partial<ResearchLimits> {
  const out: Partial<ResearchLimits> = {};
  for (const [k, v] of Object.entries(limits)) if (v !== undefined) out[k as ResearchLimitName] = v;
  return out;
}

export const RESEARCH_RUN_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'canceled'] as const;
export type ResearchRunStatus = (typeof RESEARCH_RUN_STATUSES)[number];

export const API_KEY_KINDS = ['workspace', 'personal', 'copilot'] as const;
export type ApiKeyKind = (typeof API_KEY_KINDS)[number];

/** Workspace ids are chosen by the admin; kept to a safe alphabet so they print and log cleanly. */
export const WorkspaceIdSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'must be 1–128 characters of A–Z a–z 0–9 _ . - (starting with a letter or digit)');

export interface ResearchRunView {
  id: string;
  workspaceId: string;
  status: ResearchRunStatus;
  query: string;
  sourceUrls: string[];
  limits: ResearchLimits;
  error: string | null;
  resultDocumentId: string | null;
  /** The User-Agent the crawl used (null until the run was claimed). */
  userAgent: string | null;
  /** robots.txt notes and skipped URLs of the crawl (null until it finished). */
  crawl: { robots: unknown[]; skipped: unknown[]; skippedOmitted?: number; stoppedBy?: string } | null;
  cancelRequestedAt: string | null;
  createdAt: string;
  updatedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

export interface ResearchDocumentView {
  id: string;
  runId: string;
  workspaceId: string;
  name: string;
  mimeType: 'text/markdown';
  tags: string[];
  sourceUri: string;
  indexingStatus: 'pending';
  status: 'ready';
  enabled: boolean;
  content: string;
  createdAt: string;
}

/** One stored page of a run: what the crawler collects, the store keeps and the API returns. */
export interface ResearchSnapshotView {
  url: string;
  canonicalUrl: string;
  finalUrl: string | null;
  httpStatus: number | null;
  contentType: string | null;
  bytes: number | null;
  sha256: string | null;
  fetchedAt: string;
  content: string | null;
}

export type ResearchDispatch =
  | { dispatched: true; mode: 'direct'; queued: false }
  | { dispatched: true; mode: 'queue'; queued: true; queue: string; jobId: string }
  | { dispatched: false };

/** A URL the crawl did not fetch, and why (recorded with the run). */
export interface CrawlSkip {
  url: string;
  reason: string;
}

export interface RobotsNote {
  /** The origin (`scheme://host[:port]`) whose robots.txt this is: robots.txt applies per origin. */
  host: string;
  /** `ok` (rules read), `missing` (4xx: everything allowed), `failed` (5xx/network: nothing allowed). */
  status: 'ok' | 'missing' | 'failed';
  detail?: string;
}
