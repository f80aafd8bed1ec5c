/**
 * Reading a conversation back, for a stateless engine: the data block of the first user
 * message, and the tool calls made so far paired with their results, batch by batch (one
 * batch = one assistant message with tool calls).
 */
import type { ChatMessage, ToolCall } from '../../contracts/broker-protocol.js';
import { COMPRESSION_PROMPT, dataBlockOf } from '../../contracts/prompts.js';

export interface PlannedCall {
  name: string;
  args: Record<string, unknown>;
}

export interface Executed {
  name: string;
  args: Record<string, unknown>;
  ok: boolean;
  /** Tool output, or the error message when `ok` is false. */
  text: string;
}

/** Tool calls of one assistant turn, with their results in call order. */
export type Batch = Executed[];

const TOOL_NAMES = ['read', 'grep', 'find', 'ls', 'fusion_web_fetch'];

/**
 * Tool errors reach the model as text. The tools' own messages start with the tool name
 * (`grep: …`, `read arguments must be an object`, `read.limit must be …`); the child loop or
 * broker may prefix `Error:`/`error:` or wrap them in JSON `{"error": …}`. A grep hit
 * (`grep.ts:3:…`) is told apart from `grep: …` by the space after the colon.
 */
export function isToolErrorText(text: string): boolean {
  const head = text.trimStart().slice(0, 200);
  if (/^(?:(?:tool )?error\s*:|\[error\])/iu.test(head)) return true;
  if (/^unknown tool\b/iu.test(head)) return true;
  if (/^\{\s*"error"\s*:/u.test(head)) return true;
  for (const name of TOOL_NAMES) {
    if (!head.startsWith(name)) continue;
    const rest = head.slice(name.length);
    if (/^(?:: |\.[a-z_]+ must | arguments | contains unsupported| missing required| failed| refused| rejected)/u.test(rest)) return true;
  }
  return false;
}

function parseArgs(text: string): Record<string, unknown> {
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** Batches of executed tool calls, in order. A call with no result counts as a failed call. */
export function batchesOf(messages: readonly ChatMessage[]): Batch[] {
  const results = new Map<string, ChatMessage>();
  for (const m of messages) if (m.role === 'tool' && typeof m.tool_call_id === 'string' && !results.has(m.tool_call_id)) results.set(m.tool_call_id, m);
  const batches: Batch[] = [];
  for (const m of messages) {
    if (m.role !== 'assistant' || !m.tool_calls || m.tool_calls.length === 0) continue;
    batches.push(
      m.tool_calls.map((call: ToolCall) => {
        const result = results.get(call.id);
        const text = result?.content ?? 'error: no result';
        return { name: call.name, args: parseArgs(call.arguments), ok: result !== undefined && !isToolErrorText(text), text };
      }),
    );
  }
  return batches;
}

/** Number of tool calls already made, so new call ids continue the sequence. */
export function toolCallCount(messages: readonly ChatMessage[]): number {
  return messages.reduce((n, m) => n + (m.role === 'assistant' ? (m.tool_calls?.length ?? 0) : 0), 0);
}

/** Deterministic ids `call_<n>`, numbered across the whole conversation. */
export function toToolCalls(planned: readonly PlannedCall[], already: number): ToolCall[] {
  return planned.map((p, i) => ({ id: `call_${already + i + 1}`, name: p.name, arguments: JSON.stringify(p.args) }));
}

/** The JSON data block of the first user message that has one (the stage's input). */
export function inputOf(messages: readonly ChatMessage[]): unknown {
  for (const m of messages) {
    if (m.role !== 'user') continue;
    try {
      return dataBlockOf(m.content);
    } catch {
      continue;
    }
  }
  throw new Error('builtin engine: no user message carries a ```json data block');
}

const COMPRESSION_HEAD = COMPRESSION_PROMPT.slice(0, 19); // "Your answer is over"

/** True when the last message asks to shorten the previous answer (the no-tool compression turn). */
export function isCompressionTurn(messages: readonly ChatMessage[]): boolean {
  const last = messages[messages.length - 1];
  return last !== undefined && last.role === 'user' && last.content.trimStart().startsWith(COMPRESSION_HEAD);
}

/** The last assistant answer with text (the one to shorten). */
export function lastAnswer(messages: readonly ChatMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i -= 1) {
    const m = messages[i] as ChatMessage;
    if (m.role === 'assistant' && m.content.trim() !== '' && (m.tool_calls?.length ?? 0) === 0) return m.content;
  }
  return '';
}

export function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

export function asString(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

export function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}
