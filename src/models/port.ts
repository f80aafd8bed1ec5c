/**
 * The `ModelProvider` port. The broker calls it for every model turn of every stage; the
 * builtin engine, OpenAI-compatible and Anthropic adapters implement it. Credentials live in
 * the adapter, never in a request that reaches a child.
 */
import type { ChatMessage, StopReason, StageRole, ToolCall, ToolSpec } from '../contracts/broker-protocol.js';

export interface ModelRequest {
  role: StageRole;
  /** Task-level context the provider may use for logging and the builtin engine's repository access. */
  taskId: string;
  messages: ChatMessage[];
  tools: ToolSpec[];
  maxOutputTokens?: number;
  signal?: AbortSignal;
}

export interface ModelResponse {
  content: string;
  toolCalls: ToolCall[];
  stopReason: StopReason;
  usage: { inputTokens: number; outputTokens: number };
  /** The model that answered (for usage accounting; never shown to evaluator or merger). */
  model: string;
}

export interface ModelProvider {
  /** e.g. `builtin:content-search`, `openai:gpt-4.1`. */
  readonly id: string;
  /** Engine family, recorded in the result (`builtin`, `openai`, `anthropic`). */
  readonly engine: string;
  complete(req: ModelRequest): Promise<ModelResponse>;
}
