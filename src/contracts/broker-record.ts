/**
 * Audit contracts (docs/behaviour.md#d): the shapes of the child's sealed tool-call log and seal, and the
 * broker's own record of every model call and fetch it performed for a child. The supervisor
 * cross-checks the two (docs/behaviour.md#d7).
 *
 * The child (sandbox/) imports the log types from here with `import type` only; zod never runs
 * inside the sandbox.
 */
import { z } from 'zod';

// ---------------------------------------------------------------------------------------------
// Child side: one line of `candidate-<slot>.attempt-<n>.tool-calls.jsonl` and its seal (docs/behaviour.md#d2, docs/behaviour.md#d5)
// ---------------------------------------------------------------------------------------------

export type ToolCallStatus = 'ok' | 'error';

/** One finished tool call. Hashes are lowercase hex SHA-256, no prefix. */
export interface ToolCallLogRecord {
  schema_version: string;
  ordinal: number;
  tool_name: string;
  arguments_sha256: string;
  arguments_bytes: number;
  result_bytes: number;
  result_sha256: string;
  status: ToolCallStatus;
  duration_ms: number;
  /** Successful fetch: the declared canonical URL that was requested. */
  url?: string;
  /** Rejected fetch: sha256 of the raw attempted URL (the raw URL is never persisted). */
  rejected_url_sha256?: string;
  final_url?: string;
  http_status?: number;
  /** Raw response body bytes. */
  response_bytes?: number;
  /** sha256 of the raw response body bytes. */
  content_sha256?: string;
  /**
   * Repository tools only: a wall-clock limit cut the result short, so a replay may answer
   * differently on a host under another load (docs/security.md, replay_inconclusive).
   */
  timer_cut?: true;
}

/** Required keys of a log record, in the order the child writes them. */
export const TOOL_CALL_REQUIRED_KEYS = [
  'schema_version',
  'ordinal',
  'tool_name',
  'arguments_sha256',
  'arguments_bytes',
  'result_bytes',
  'result_sha256',
  'status',
  'duration_ms',
] as const;

/** Fetch provenance keys of a log record (a fetch record only). */
export const TOOL_CALL_FETCH_KEYS = [
  'url',
  'rejected_url_sha256',
  'final_url',
  'http_status',
  'response_bytes',
  'content_sha256',
] as const;

/** Optional keys of a log record: fetch provenance, and the timer flag of a repository tool. */
export const TOOL_CALL_OPTIONAL_KEYS = [...TOOL_CALL_FETCH_KEYS, 'timer_cut'] as const;

export type ToolCallSealStatus = 'complete' | 'failed';

/** `<log>.seal.json`: exactly these five keys, one line + "\n". */
export interface ToolCallSeal {
  schema_version: string;
  status: ToolCallSealStatus;
  record_count: number;
  total_result_bytes: number;
  log_sha256: string;
}

export const TOOL_CALL_SEAL_KEYS = [
  'schema_version',
  'status',
  'record_count',
  'total_result_bytes',
  'log_sha256',
] as const;

// ---------------------------------------------------------------------------------------------
// Broker side: its own record of each call it served for one child (docs/behaviour.md#d7)
// ---------------------------------------------------------------------------------------------

const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, 'must be a lowercase hex sha256');
const count = z.number().int().min(0);
const nonBlank = z.string().trim().min(1);

/** A model request the broker forwarded (credentials added by the broker, never by the child). */
export const brokerModelRecordSchema = z.strictObject({
  kind: z.literal('model'),
  /** Position in this child's broker record stream, from 0, shared by model and fetch records. */
  ordinal: count,
  /** ISO 8601 time the request arrived at the broker. */
  at: z.iso.datetime({ offset: true }),
  durationMs: count,
  requestBytes: count,
  responseBytes: count,
  /** How many tool calls the model's response asked for. */
  toolCallsRequested: count,
  ok: z.boolean(),
  /**
   * Provenance binding the child's self-written log to what really crossed the broker: the tool
   * calls the model asked for (name + sha256 of the arguments text), the tool results the child
   * sent back in this request (sha256 of each tool message after the last assistant message),
   * and the sha256 of the response's content.
   */
  requested_calls: z.array(z.strictObject({ name: z.string(), arguments_sha256: sha256Hex })).optional(),
  sent_results: z.array(sha256Hex).optional(),
  content_sha256: sha256Hex.optional(),
});

/**
 * A fetch the broker performed (or refused) through the egress guard.
 *
 * `url` is the requested URL, which must be a declared canonical URL; when the broker refused a
 * URL that was not declared it records only `rejected_url_sha256` = sha256(raw attempted URL) and
 * may leave `url` out, mirroring the child's log, so no raw undeclared URL is stored anywhere.
 */
export const brokerFetchRecordSchema = z
  .strictObject({
    kind: z.literal('fetch'),
    ordinal: count,
    at: z.iso.datetime({ offset: true }),
    url: nonBlank.optional(),
    ok: z.boolean(),
    final_url: nonBlank.optional(),
    http_status: z.number().int().min(100).max(599).optional(),
    content_sha256: sha256Hex.optional(),
    /**
     * sha256 of the tool result the broker's answer makes (src/contracts/web-fetch-result.ts): the
     * extraction the model must be shown. Absent in records written before it was kept.
     */
    result_sha256: sha256Hex.optional(),
    response_bytes: count.optional(),
    /** One of the egress error codes (docs/behaviour.md#e3), or another snake_case broker refusal code. */
    error_code: z.string().regex(/^[a-z][a-z0-9_]*$/, 'must be a snake_case error code').optional(),
    rejected_url_sha256: sha256Hex.optional(),
  })
  .superRefine((record, ctx) => {
    const need = (key: keyof typeof record, why: string): void => {
      if (record[key] === undefined) ctx.addIssue({ code: 'custom', path: [key], message: `is required ${why}` });
    };
    const forbid = (key: keyof typeof record, why: string): void => {
      if (record[key] !== undefined) ctx.addIssue({ code: 'custom', path: [key], message: `must be absent ${why}` });
    };
    if (record.ok) {
      need('url', 'for a successful fetch');
      need('final_url', 'for a successful fetch');
      need('http_status', 'for a successful fetch');
      need('content_sha256', 'for a successful fetch');
      need('response_bytes', 'for a successful fetch');
      forbid('error_code', 'for a successful fetch');
      forbid('rejected_url_sha256', 'for a successful fetch');
    } else {
      need('error_code', 'for a failed fetch');
      if (record.url === undefined && record.rejected_url_sha256 === undefined) {
        ctx.addIssue({ code: 'custom', path: ['url'], message: 'a failed fetch needs url or rejected_url_sha256' });
      }
      forbid('final_url', 'for a failed fetch');
      forbid('content_sha256', 'for a failed fetch');
      forbid('result_sha256', 'for a failed fetch');
    }
  });

export const brokerRecordSchema = z.union([brokerModelRecordSchema, brokerFetchRecordSchema]);

export type BrokerModelRecord = z.infer<typeof brokerModelRecordSchema>;
export type BrokerFetchRecord = z.infer<typeof brokerFetchRecordSchema>;
export type BrokerRecord = BrokerModelRecord | BrokerFetchRecord;
