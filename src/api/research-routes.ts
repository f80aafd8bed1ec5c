/**
 * /api/v1/research: the research-run routes (on the Unix socket and on the opt-in TCP listener).
 *
 *   GET  /api/v1/research?limit=&cursor=  → {runs, limit, nextCursor} (the workspace's runs, newest first)
 *   POST /api/v1/research                 {query, sourceUrls, limits?} + Idempotency-Key
 *        → 202 {run, deduplicated:false, dispatch} | 200 {run, deduplicated:true, dispatch:{dispatched:false}}
 *   GET  /api/v1/research/:id             → {run}
 *   POST /api/v1/research/:id/cancel      + Idempotency-Key → {run}
 *   GET  /api/v1/research/:id/document    → {document} (404 until the run succeeded)
 *   GET  /api/v1/research/:id/snapshots   → {snapshots}
 *
 * Every route needs `Authorization: Bearer <workspace key>`; the workspace is the key's, never
 * the body's. Authentication comes first, so an anonymous caller learns nothing about ids.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { FusionError } from '../errors.js';
import {
  normalisePayload, ResearchCreateBodySchema, type ResearchDocumentView, type ResearchRunView, type ResearchSnapshotView,
} from '../contracts/research.js';
import { IDEMPOTENCY_KEY_PATTERN } from '../contracts/agent-tools.js';
import { authenticate, type Principal } from '../research/api-keys.js';
import type { AuthFailureThrottle } from './auth-throttle.js';
import { markAuthenticated } from './tcp-admission.js';
import type { ResearchService } from '../research/research-service.js';
import type { ApiKeyStore, ResearchDocumentRecord, ResearchRunRecord, ResearchSnapshotRecord } from '../store/research-port.js';
import { parseWith, readJsonBody, sendJson } from './http-util.js';
import { allowedMethodsText, matchRoute, type RouteName } from '../contracts/routes.js';

export interface ResearchApiContext {
  service: ResearchService;
  keys: ApiKeyStore;
}

export function runView(run: ResearchRunRecord): ResearchRunView {
  return {
    id: run.id,
    workspaceId: run.workspaceId,
    status: run.status,
    query: run.query,
    sourceUrls: run.sourceUrls,
    limits: run.limits,
    error: run.error,
    resultDocumentId: run.resultDocumentId,
    userAgent: run.userAgent,
    crawl: run.crawlReport,
    cancelRequestedAt: run.cancelRequestedAt,
    createdAt: run.createdAt,
    updatedAt: run.updatedAt,
    startedAt: run.startedAt,
    finishedAt: run.finishedAt,
  };
}

export function documentView(doc: ResearchDocumentRecord): ResearchDocumentView {
  return {
    id: doc.id,
    runId: doc.runId,
    workspaceId: doc.workspaceId,
    name: doc.name,
    mimeType: 'text/markdown',
    tags: doc.tags,
    sourceUri: doc.sourceUri,
    indexingStatus: 'pending',
    status: 'ready',
    enabled: doc.enabled,
    content: doc.content,
    createdAt: doc.createdAt,
  };
}

export function snapshotView(s: ResearchSnapshotRecord): ResearchSnapshotView {
  return {
    url: s.url, canonicalUrl: s.canonicalUrl, finalUrl: s.finalUrl, httpStatus: s.httpStatus, contentType: s.contentType,
    bytes: s.bytes, sha256: s.sha256, fetchedAt: s.fetchedAt, content: s.content,
  };
}

function idempotencyKey(req: IncomingMessage): string {
  const raw = req.headers['idempotency-key'];
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (value === undefined || value === '') {
    throw new FusionError('invalid_input', 'Idempotency-Key header is required', { details: { field: 'Idempotency-Key' } });
  }
  if (!IDEMPOTENCY_KEY_PATTERN.test(value)) {
    throw new FusionError('invalid_input', 'Idempotency-Key must be 1–255 visible ASCII characters', { details: { field: 'Idempotency-Key' } });
  }
  return value;
}

/** Runs listed per page: default and most. */
export const RESEARCH_LIST_DEFAULT_LIMIT = 20;
export const RESEARCH_LIST_MAX_LIMIT = 100;

function listQuery(req: IncomingMessage): { limit: number; cursor?: string } {
  const query = new URL(req.url ?? '/', 'http://fusion.invalid').searchParams;
  const rawLimit = query.get('limit');
  let limit = RESEARCH_LIST_DEFAULT_LIMIT;
  if (rawLimit !== null) {
    limit = /^\d{1,4}$/u.test(rawLimit) ? Number(rawLimit) : NaN;
    if (!(limit >= 1 && limit <= RESEARCH_LIST_MAX_LIMIT)) {
      throw new FusionError('invalid_input', `limit must be an integer from 1 to ${String(RESEARCH_LIST_MAX_LIMIT)} (got ${rawLimit.slice(0, 40)})`, { details: { field: 'limit' } });
    }
  }
  const cursor = query.get('cursor');
  if (cursor === '') throw new FusionError('invalid_input', 'cursor must be the nextCursor of the previous page (omit it for the first page)', { details: { field: 'cursor' } });
  return cursor === null ? { limit } : { limit, cursor };
}

/**
 * Authenticates the request; with a throttle (the TCP listener), an address over its failure
 * limit is refused before its key is looked at, each attempt counts against the address while
 * it is being authenticated, and each 401 counts after.
 */
export async function principalOf(ctx: Pick<ResearchApiContext, 'keys'>, req: IncomingMessage, throttle: AuthFailureThrottle | undefined): Promise<Principal> {
  if (throttle === undefined) return authenticate(ctx.keys, req.headers.authorization);
  const settle = await throttle.begin(req.socket.remoteAddress);
  try {
    const principal = await authenticate(ctx.keys, req.headers.authorization);
    settle(false);
    // The connection now counts against the keyholders' share, not the anonymous one.
    markAuthenticated(req);
    return principal;
  } catch (err) {
    settle(err instanceof FusionError && err.code === 'unauthorized');
    throw err;
  }
}

/** `parts` is the path split on '/', starting with 'api'. `throttle`: the TCP listener's failed-auth limit. */
export async function routeResearch(ctx: ResearchApiContext | undefined, req: IncomingMessage, res: ServerResponse, parts: readonly string[], pathname: string, throttle?: AuthFailureThrottle): Promise<void> {
  if (parts[1] !== 'v1' || parts[2] !== 'research' || parts.length > 5 || ctx === undefined) throw new FusionError('not_found', `no route ${pathname}`);
  const method = req.method ?? 'GET';
  const principal = await principalOf(ctx, req, throttle);
  const { service } = ctx;
  const hit = matchRoute(RESEARCH_ROUTES, method, pathname);
  if (hit === undefined) throw new FusionError('not_found', `no route ${pathname}`);
  if (hit.kind === 'method_not_allowed') throw new FusionError('method_not_allowed', `${method} is not allowed on ${pathname}; ${allowedMethodsText(hit.allowed)}`);
  if (hit.name === 'researchList') {
    const { limit, cursor } = listQuery(req);
    const page = await service.list(principal, limit, cursor);
    return sendJson(res, 200, { runs: page.runs.map(runView), limit, nextCursor: page.nextCursor });
  }
  if (hit.name === 'researchCreate') {
    const key = idempotencyKey(req);
    const body = parseWith(ResearchCreateBodySchema, await readJsonBody(req), 'research create body');
    const outcome = await service.create(principal, key, normalisePayload(body));
    return sendJson(res, outcome.deduplicated ? 200 : 202, { run: runView(outcome.run), deduplicated: outcome.deduplicated, dispatch: outcome.dispatch });
  }
  let id: string;
  try {
    id = decodeURIComponent(hit.params.id!);
  } catch {
    throw new FusionError('not_found', `no research run ${hit.params.id!}`);
  }
  switch (hit.name) {
    case 'researchRun':
      return sendJson(res, 200, { run: runView(await service.get(principal, id)) });
    case 'researchCancel':
      idempotencyKey(req);
      return sendJson(res, 200, { run: runView(await service.cancel(principal, id)) });
    case 'researchDocument':
      return sendJson(res, 200, { document: documentView(await service.document(principal, id)) });
    case 'researchSnapshots':
      return sendJson(res, 200, { snapshots: (await service.snapshots(principal, id)).map(snapshotView) });
  }
}

/** The research routes, matched after the caller's key is checked (an unknown path is answered only to a known caller). */
const RESEARCH_ROUTES = ['researchList', 'researchCreate', 'researchRun', 'researchCancel', 'researchDocument', 'researchSnapshots'] as const satisfies readonly RouteName[];
