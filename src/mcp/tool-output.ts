/**
 * What each MCP tool declares about itself beyond its input: behaviour hints (`annotations`,
 * MCP 2025-06-18 and later: readOnlyHint, destructiveHint, idempotentHint, openWorldHint) and
 * the JSON Schema of its `structuredContent` (`outputSchema`).
 *
 * Every tool result carries `structuredContent`: on success the object described here, on a
 * failure the error envelope `{error:{code, message, …}}` with `isError: true`. A client checks
 * `structuredContent` against `outputSchema` in both cases, so each schema accepts either shape
 * (`anyOf` of the success keys and `error`). The success shapes name the keys an agent relies on
 * and leave room for more (`additionalProperties` is not closed): the daemon's replies grow
 * fields over time and an older client must still accept them.
 */
import type { ToolName } from './tool-schemas.js';

export interface ToolAnnotations {
  title: string;
  readOnlyHint: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint: boolean;
}

export const TOOL_ANNOTATIONS: Record<ToolName, ToolAnnotations> = {
  fusion_investigate: { title: 'Investigate a repository (Fusion task)', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  fusion_research: { title: 'Research with declared web sources (Fusion task)', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  bg_result: { title: 'Verified result of a task', readOnlyHint: true, openWorldHint: false },
  bg_status: { title: 'State of a task', readOnlyHint: true, openWorldHint: false },
  bg_cancel: { title: 'Cancel a task', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  research_run: { title: 'Start a durable research run', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  research_get: { title: 'Status and document of a research run', readOnlyHint: true, openWorldHint: false },
  research_snapshots: { title: 'Pages a research run stored', readOnlyHint: true, openWorldHint: false },
  research_list: { title: 'Research runs of the workspace', readOnlyHint: true, openWorldHint: false },
  web_read: { title: 'Read one web page', readOnlyHint: true, openWorldHint: true },
  web_crawl: { title: 'Crawl web pages (not stored)', readOnlyHint: true, openWorldHint: true },
  web_search: { title: 'Search the web', readOnlyHint: true, openWorldHint: true },
};

type Json = Record<string, unknown>;

const str: Json = { type: 'string' };
const nullableStr: Json = { type: ['string', 'null'] };
const int: Json = { type: 'integer' };
const nullableInt: Json = { type: ['integer', 'null'] };
const bool: Json = { type: 'boolean' };
const obj: Json = { type: 'object' };
const arrayOf = (items: Json): Json => ({ type: 'array', items });

const ERROR: Json = {
  type: 'object',
  properties: { code: str, message: str, retryable: bool, details: obj },
  required: ['code', 'message'],
};

const TASK_STATUS: Json = { type: 'string', enum: ['running', 'completed', 'failed', 'cancelled'] };
const TASK: Json = { taskId: str, workflow: { type: 'string', enum: ['investigate', 'research'] }, state: str, status: TASK_STATUS, error: { type: ['object', 'null'] } };
const RUN: Json = {
  type: 'object',
  properties: { id: str, workspaceId: str, status: { type: 'string', enum: ['queued', 'running', 'succeeded', 'failed', 'canceled'] }, query: str, error: nullableStr, resultDocumentId: nullableStr },
  required: ['id', 'status'],
};
const SNAPSHOT: Json = {
  type: 'object',
  properties: { url: str, canonicalUrl: str, finalUrl: nullableStr, httpStatus: nullableInt, contentType: nullableStr, bytes: nullableInt, sha256: nullableStr, fetchedAt: str, content: nullableStr },
  required: ['url', 'canonicalUrl'],
};
const SKIPPED: Json = arrayOf({ type: 'object', properties: { url: str, reason: str }, required: ['url', 'reason'] });

/** A success object with these properties (the first `required` keys), or the error envelope. */
function output(properties: Json, required: string[]): Json {
  return { type: 'object', properties: { ...properties, error: { anyOf: [ERROR, { type: ['object', 'null'] }] } }, anyOf: [{ required }, { required: ['error'] }] };
}

export const TOOL_OUTPUT_SCHEMAS: Record<ToolName, Json> = {
  fusion_investigate: output({ taskId: str, workflow: str, state: str, createdAt: str, requestSha256: str, canonicalInputSha256: str, text: str }, ['taskId', 'workflow', 'state', 'text']),
  fusion_research: output({ taskId: str, workflow: str, state: str, createdAt: str, requestSha256: str, canonicalInputSha256: str, text: str }, ['taskId', 'workflow', 'state', 'text']),
  bg_result: output(
    { taskId: str, workflow: str, state: str, status: TASK_STATUS, delivery: { type: 'string', enum: ['none', 'inline', 'artifact'] }, answer: { type: 'object', properties: { present: bool }, required: ['present'] }, engine: str, signed: bool },
    ['taskId', 'status', 'delivery', 'answer'],
  ),
  bg_status: output(TASK, ['taskId', 'state', 'status']),
  bg_cancel: output(TASK, ['taskId', 'state', 'status']),
  research_run: output({ run: RUN, deduplicated: bool, dispatch: obj }, ['run', 'deduplicated']),
  research_get: output({ run: RUN, document: { anyOf: [{ type: 'object', properties: { id: str, name: str, content: str }, required: ['id', 'content'] }, { type: 'null' }] } }, ['run', 'document']),
  research_snapshots: output({ runId: str, snapshots: arrayOf(SNAPSHOT) }, ['runId', 'snapshots']),
  research_list: output({ runs: arrayOf(RUN), limit: int, nextCursor: nullableStr }, ['runs', 'limit', 'nextCursor']),
  web_read: output({ read: bool, markdown: str, url: str, canonicalUrl: str, finalUrl: nullableStr, httpStatus: nullableInt, contentType: nullableStr, bytes: nullableInt, sha256: nullableStr, truncated: bool }, ['read', 'markdown', 'url']),
  web_crawl: output({ markdown: str, pages: arrayOf(SNAPSHOT), skipped: SKIPPED, robots: { type: 'array' }, stoppedBy: str }, ['markdown', 'pages', 'skipped']),
  web_search: output({ provider: str, query: str, results: arrayOf({ type: 'object', properties: { rank: int, title: str, url: str, snippet: str, fetchable: bool }, required: ['url'] }), markdown: str }, ['provider', 'query', 'results', 'markdown']),
};
