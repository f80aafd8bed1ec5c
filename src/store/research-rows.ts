/**
 * Row shapes of the research tables and their mapping to the port's records. As for tasks, a
 * status or key kind this build does not know means a corrupt or foreign store: store_error.
 */
import { FusionError } from '../errors.js';
import { API_KEY_KINDS, RESEARCH_RUN_STATUSES, type ApiKeyKind, type ResearchRunStatus } from '../contracts/research.js';
import type { ResearchLimits } from '../contracts/research-limits.js';
import type { ApiKeyRecord, ResearchDocumentRecord, ResearchRunRecord, ResearchSnapshotRecord } from './research-port.js';

export interface ResearchRunRow {
  id: string;
  workspace_id: string;
  idempotency_key: string;
  payload_sha256: string;
  query: string;
  source_urls: string;
  limits: string;
  status: string;
  error: string | null;
  result_document_id: string | null;
  cancel_requested_at: string | null;
  user_agent: string | null;
  crawl_report: string | null;
  started_at: string | null;
  finished_at: string | null;
  claims: number;
  created_at: string;
  updated_at: string;
}

export const RUN_COLUMNS =
  'id, workspace_id, idempotency_key, payload_sha256, query, source_urls, limits, status, error, result_document_id, ' +
  'cancel_requested_at, user_agent, crawl_report, started_at, finished_at, claims, created_at, updated_at';

export interface ResearchDocumentRow {
  id: string;
  run_id: string;
  workspace_id: string;
  name: string;
  mime_type: string;
  tags: string;
  source_uri: string;
  indexing_status: string;
  status: string;
  enabled: number;
  content: string;
  created_at: string;
}

export interface ResearchSnapshotRow {
  url: string;
  canonical_url: string;
  final_url: string | null;
  http_status: number | null;
  content_type: string | null;
  bytes: number | null;
  sha256: string | null;
  content: string | null;
  fetched_at: string;
}

export interface ApiKeyRow {
  id: string;
  workspace_id: string;
  kind: string;
  key_sha256: string;
  created_at: string;
  revoked_at: string | null;
}

function corrupt(what: string, value: string): FusionError {
  return new FusionError('store_error', `store holds an unknown ${what} ${JSON.stringify(value)}`, { retryable: false });
}

export function toRunRecord(row: ResearchRunRow): ResearchRunRecord {
  if (!(RESEARCH_RUN_STATUSES as readonly string[]).includes(row.status)) throw corrupt('research run status', row.status);
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    idempotencyKey: row.idempotency_key,
    payloadSha256: row.payload_sha256,
    query: row.query,
    sourceUrls: JSON.parse(row.source_urls) as string[],
    limits: JSON.parse(row.limits) as ResearchLimits,
    status: row.status as ResearchRunStatus,
    error: row.error,
    resultDocumentId: row.result_document_id,
    cancelRequestedAt: row.cancel_requested_at,
    userAgent: row.user_agent,
    crawlReport: row.crawl_report === null ? null : (JSON.parse(row.crawl_report) as ResearchRunRecord['crawlReport']),
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    claims: row.claims,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function toDocumentRecord(row: ResearchDocumentRow): ResearchDocumentRecord {
  return {
    id: row.id,
    runId: row.run_id,
    workspaceId: row.workspace_id,
    name: row.name,
    mimeType: row.mime_type,
    tags: JSON.parse(row.tags) as string[],
    sourceUri: row.source_uri,
    indexingStatus: row.indexing_status,
    status: row.status,
    enabled: row.enabled === 1,
    content: row.content,
    createdAt: row.created_at,
  };
}

export function toSnapshotRecord(row: ResearchSnapshotRow): ResearchSnapshotRecord {
  return {
    url: row.url,
    canonicalUrl: row.canonical_url,
    finalUrl: row.final_url,
    httpStatus: row.http_status,
    contentType: row.content_type,
    bytes: row.bytes,
    sha256: row.sha256,
    content: row.content,
    fetchedAt: row.fetched_at,
  };
}

export function toKeyRecord(row: ApiKeyRow): ApiKeyRecord {
  if (!(API_KEY_KINDS as readonly string[]).includes(row.kind)) throw corrupt('API key kind', row.kind);
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    kind: row.kind as ApiKeyKind,
    keySha256: row.key_sha256,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
  };
}
