/**
 * The broker wire protocol: HTTP/1.1 + JSON over the per-child Unix socket. Plain types with no
 * imports, because the sandbox child (no npm packages) imports them as types.
 *
 *   POST /v1/model   ModelTurnRequest  → ModelTurnResponse
 *   POST /v1/fetch   FetchRequest      → FetchResponse         (research candidates only)
 *   errors           { error: { code, message, details } }
 *
 * The child never sends a credential or a model name: the broker knows which model serves this
 * child and adds the key on the host side.
 */

export type ChatRole = 'system' | 'user' | 'assistant' | 'tool';

export interface ToolCall {
  /** Provider-assigned id (synthesised by the provider adapter when a server omits it). */
  id: string;
  name: string;
  /** JSON text of the arguments. */
  arguments: string;
}

export interface ChatMessage {
  role: ChatRole;
  content: string;
  /** Assistant messages: the tool calls it asked for. */
  tool_calls?: ToolCall[];
  /** Tool messages: the call this result answers. */
  tool_call_id?: string;
  name?: string;
}

/** A tool offered to the model, with a JSON-Schema `parameters` object. */
export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export interface ModelTurnRequest {
  messages: ChatMessage[];
  tools: ToolSpec[];
  /** Why this turn happens: a normal agent step or the one no-tool compression turn. */
  purpose?: 'step' | 'compress';
}

export type StopReason = 'stop' | 'tool_calls' | 'length' | 'refusal';

export interface ModelTurnResponse {
  message: { role: 'assistant'; content: string; tool_calls: ToolCall[] };
  stop_reason: StopReason;
  usage: { input_tokens: number; output_tokens: number };
}

export interface FetchRequest {
  url: string;
  extract?: 'text' | 'markdown';
}

export interface FetchResult {
  url: string;
  final_url: string;
  status: number;
  content_type: string;
  format: 'text' | 'markdown';
  truncated: boolean;
  content: string;
  /** Provenance for the sealed log (docs/behaviour.md#d3). */
  response_bytes: number;
  content_sha256: string;
}

export type FetchResponse = { ok: true; result: FetchResult } | { ok: false; error: { code: string; message: string; http_status?: number } };

export type StageRole = 'candidate' | 'evaluator' | 'repair' | 'merger';

/** The child's request file (/run/fusion/request.json), written by the supervisor. */
export interface ChildRequest {
  schema_version: string;
  task_id: string;
  workflow: 'investigate' | 'research';
  role: StageRole;
  /** Candidate slot 1..3 (candidates only; never shown to evaluator or merger). */
  slot: number | null;
  attempt: number;
  /** Tool names this child may use; empty for evaluator, repair and merger. */
  tools: string[];
  /** Declared canonical URLs (research candidates). */
  declared_urls: string[];
  messages: ChatMessage[];
  limits: {
    max_model_requests: number;
    max_tool_calls: number;
    max_tool_result_bytes: number;
    /** docs/behaviour.md#b8 cap for this role, measured as Buffer.byteLength(JSON.stringify(text)). */
    output_cap_bytes: number;
  };
  /** The one compression instruction used when a candidate's answer is over its cap. */
  compression_prompt: string;
}

/** What the child writes to /out/result.json when it settles. */
export interface ChildOutcome {
  status: 'answered' | 'output_cap' | 'failed';
  answer_bytes: number;
  model_requests: number;
  tool_calls: number;
  compressed: boolean;
  error?: { code: string; message: string };
}
