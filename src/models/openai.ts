/**
 * OpenAI-compatible Chat Completions adapter (`POST {baseUrl}/chat/completions`): OpenAI itself
 * and the servers that imitate it (ollama, vLLM, llama.cpp, LM Studio, OpenRouter, …).
 *
 * Compatible servers deviate; this adapter tolerates, conservatively:
 * - tool-call `arguments` as an object instead of JSON text (re-serialised);
 * - missing or duplicate tool-call ids (synthesised `call_<turn>_<i>`, deterministic, so a
 *   replayed turn gets the same ids);
 * - a tool call printed as text (`<tool_call>{"name":…,"arguments":…}</tool_call>`, or content
 *   that is exactly one JSON object / array of `{name, arguments|parameters}`), read as tool
 *   calls when tools were offered, even when a name is not an offered tool or the arguments do
 *   not parse: the agent then answers that call with an error result and the model can correct
 *   itself, instead of its tool call becoming its final answer;
 * - `content` as an array of text parts, a leading `<think>…</think>` block (dropped);
 * - `finish_reason` variants, legacy `function_call`, missing usage (estimated).
 * `message.refusal` and `finish_reason: content_filter` map to stopReason `refusal`.
 */
import type { ChatMessage, StopReason, ToolCall, ToolSpec } from '../contracts/broker-protocol.js';
import { FusionError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Credential } from './credentials.js';
import {
  effectiveMaxTokens,
  estimateTokens,
  createRemoteProvider,
  type ConfiguredProvider,
  type RemoteModelSettings,
} from './remote-provider.js';
import type { ModelRequest, ModelResponse } from './port.js';
import { redactSecrets } from '../contracts/secret-redaction.js';

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

/** OpenAI's own API rejects `max_tokens` for newer models; most compatible servers only know it. */
export function maxTokensField(baseUrl: string): 'max_tokens' | 'max_completion_tokens' {
  try {
    return new URL(baseUrl).hostname === 'api.openai.com' ? 'max_completion_tokens' : 'max_tokens';
  } catch {
    return 'max_tokens';
  }
}

function toWireMessage(m: ChatMessage, index: number): Json {
  switch (m.role) {
    case 'assistant': {
      const calls = m.tool_calls ?? [];
      if (calls.length === 0) return { role: 'assistant', content: m.content };
      return {
        role: 'assistant',
        // null, not '', with tool calls: what OpenAI documents and what strict servers accept.
        content: m.content === '' ? null : m.content,
        tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })),
      };
    }
    case 'tool':
      if (m.tool_call_id === undefined || m.tool_call_id === '') {
        throw new FusionError('model_error', `messages[${index}]: a tool result must carry tool_call_id`, { retryable: false });
      }
      return { role: 'tool', tool_call_id: m.tool_call_id, content: m.content };
    default:
      return { role: m.role, content: m.content };
  }
}

export function toOpenAIBody(req: ModelRequest, settings: Pick<RemoteModelSettings, 'model' | 'baseUrl' | 'maxOutputTokens'>): Json {
  const maxTokens = effectiveMaxTokens(req.maxOutputTokens, settings.maxOutputTokens);
  return {
    model: settings.model,
    messages: req.messages.map(toWireMessage),
    ...(req.tools.length > 0
      ? { tools: req.tools.map((t: ToolSpec) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } })) }
      : {}),
    ...(maxTokens === undefined ? {} : { [maxTokensField(settings.baseUrl)]: maxTokens }),
  };
}

function argumentsText(value: unknown): string | null {
  if (value === undefined || value === null || value === '') return '{}';
  if (typeof value === 'string') return value;
  if (isObject(value)) return JSON.stringify(value);
  return null;
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (isObject(part) && typeof part.text === 'string' && (part.type === undefined || part.type === 'text' || part.type === 'output_text') ? part.text : ''))
      .join('');
  }
  return '';
}

/** Drops one leading reasoning block some local models print (`<think>…</think>`). */
function stripThinking(text: string): string {
  const m = /^\s*<think>[\s\S]*?<\/think>\s*/.exec(text);
  return m ? text.slice(m[0].length) : text;
}

interface TextCall {
  name: string;
  arguments: string;
}

/** The name given to a `<tool_call>` block whose content does not even parse. */
export const UNPARSED_TOOL_CALL = 'unparsed_tool_call';

/**
 * One `{name, arguments|parameters}` object, or null when the object is not a tool call. The
 * name need not be an offered tool and string arguments need not parse: the agent rejects such
 * a call with an error result the model can act on.
 */
function textCall(value: unknown): TextCall | null {
  if (!isObject(value)) return null;
  const fn = isObject(value.function) && value.type === 'function' ? value.function : value;
  const name = fn.name;
  if (typeof name !== 'string' || name.trim() === '') return null;
  const allowed = new Set(['name', 'arguments', 'parameters', 'type', 'id', 'function']);
  if (Object.keys(value).some((k) => !allowed.has(k))) return null;
  const args = 'arguments' in fn ? fn.arguments : fn.parameters;
  if (typeof args === 'string') return { name, arguments: args };
  if (args === undefined) return { name, arguments: '{}' };
  return { name, arguments: JSON.stringify(args) };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Tool calls a model printed as text, when tools were offered. `<tool_call>` blocks are always
 * calls (one that does not parse becomes a call of \`unparsed_tool_call\` carrying its text);
 * bare JSON is a call only when it is nothing but `{name, arguments|parameters}` objects, each
 * carrying its arguments explicitly.
 */
export function toolCallsFromText(content: string, offered: ReadonlySet<string>): { content: string; calls: TextCall[] } | null {
  if (offered.size === 0) return null;
  if (content.includes('<tool_call>')) {
    const calls: TextCall[] = [];
    const tag = /<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/g;
    let rest = '';
    let last = 0;
    for (let m = tag.exec(content); m !== null; m = tag.exec(content)) {
      const raw = m[1]!.trim();
      calls.push(textCall(parseJson(raw)) ?? { name: UNPARSED_TOOL_CALL, arguments: raw.slice(0, 4096) });
      rest += content.slice(last, m.index);
      last = m.index + m[0].length;
    }
    rest += content.slice(last);
    return calls.length > 0 ? { content: rest.trim(), calls } : null;
  }
  const trimmed = content.trim().replace(/^```(?:json)?\s*\n([\s\S]*?)\n?```$/, '$1').trim();
  if (!trimmed.startsWith('{') && !trimmed.startsWith('[')) return null;
  const parsed = parseJson(trimmed);
  const items = Array.isArray(parsed) ? parsed : [parsed];
  if (items.length === 0) return null;
  const calls = items.map((item) => textCall(item));
  if (calls.some((c) => c === null)) return null;
  // A bare object must carry its arguments explicitly: `{"name":"read"}` alone stays text.
  if (items.some((item) => isObject(item) && !('arguments' in item) && !('parameters' in item) && !isObject(item.function))) return null;
  return { content: '', calls: calls as TextCall[] };
}

function stopReasonOf(finish: unknown, hasCalls: boolean, refused: boolean): StopReason {
  if (refused) return 'refusal';
  if (finish === 'length' || finish === 'max_tokens') return 'length';
  if (finish === 'content_filter') return 'refusal';
  return hasCalls ? 'tool_calls' : 'stop';
}

function tokenCount(usage: Json, ...names: string[]): number | undefined {
  for (const name of names) {
    const v = usage[name];
    if (typeof v === 'number' && Number.isFinite(v) && v >= 0) return Math.round(v);
  }
  return undefined;
}

function bad(message: string): FusionError {
  return new FusionError('model_error', message, { retryable: false });
}

/** Maps a Chat Completions response body to the port's response. */
export function fromOpenAIBody(body: unknown, req: ModelRequest, providerId: string, configuredModel: string): ModelResponse {
  if (!isObject(body)) throw bad(`${providerId}: response body is not a JSON object`);
  if (body.error !== undefined && body.choices === undefined) {
    const e = body.error;
    const message = typeof e === 'string' ? e : isObject(e) && typeof e.message === 'string' ? e.message : 'unknown error';
    throw bad(`${providerId}: server returned an error: ${redactSecrets(message).slice(0, 500)}`);
  }
  const choice = Array.isArray(body.choices) ? body.choices[0] : undefined;
  if (!isObject(choice) || !isObject(choice.message)) throw bad(`${providerId}: response has no choices[0].message`);
  const message = choice.message;
  const refusal = typeof message.refusal === 'string' && message.refusal.trim() !== '' ? message.refusal : undefined;
  let content = stripThinking(contentText(message.content));
  const turn = req.messages.filter((m) => m.role === 'assistant').length;

  const raw: Array<{ id?: unknown; name: unknown; arguments: unknown }> = [];
  if (Array.isArray(message.tool_calls)) {
    for (const c of message.tool_calls) {
      if (!isObject(c)) throw bad(`${providerId}: a tool call is not an object`);
      const fn = isObject(c.function) ? c.function : c;
      raw.push({ id: c.id, name: fn.name, arguments: fn.arguments });
    }
  } else if (isObject(message.function_call)) {
    raw.push({ name: message.function_call.name, arguments: message.function_call.arguments });
  }
  if (raw.length === 0 && refusal === undefined) {
    const fromText = toolCallsFromText(content, new Set(req.tools.map((t) => t.name)));
    if (fromText !== null) {
      content = fromText.content;
      raw.push(...fromText.calls);
    }
  }

  const seen = new Set<string>();
  const toolCalls: ToolCall[] = raw.map((c, i) => {
    if (typeof c.name !== 'string' || c.name === '') throw bad(`${providerId}: tool call ${i} has no function name`);
    const args = argumentsText(c.arguments);
    if (args === null) throw bad(`${providerId}: tool call ${i} (${c.name}) has arguments that are neither JSON text nor an object`);
    let id = typeof c.id === 'string' && c.id.trim() !== '' ? c.id : `call_${turn}_${i}`;
    if (seen.has(id)) id = `call_${turn}_${i}`;
    seen.add(id);
    return { id, name: c.name, arguments: args };
  });

  const usage = isObject(body.usage) ? body.usage : {};
  const inputTokens =
    tokenCount(usage, 'prompt_tokens', 'input_tokens') ??
    estimateTokens(req.messages.map((m) => m.content + (m.tool_calls ?? []).map((c) => c.name + c.arguments).join('')).join('') + JSON.stringify(req.tools));
  const outputTokens = tokenCount(usage, 'completion_tokens', 'output_tokens') ?? estimateTokens(content + toolCalls.map((c) => c.name + c.arguments).join(''));

  return {
    content: refusal !== undefined && content.trim() === '' ? refusal : content,
    toolCalls,
    stopReason: stopReasonOf(choice.finish_reason, toolCalls.length > 0, refusal !== undefined),
    usage: { inputTokens, outputTokens },
    model: typeof body.model === 'string' && body.model !== '' ? body.model : configuredModel,
  };
}

export function createOpenAIProvider(settings: RemoteModelSettings, credential: Credential | undefined, log: Logger): ConfiguredProvider {
  return createRemoteProvider({
    engine: 'openai',
    settings,
    credential,
    log,
    path: '/chat/completions',
    headers: (key): Record<string, string> => (key === undefined ? {} : { authorization: `Bearer ${key}` }),
    toBody: (req) => toOpenAIBody(req, settings),
    fromBody: (json, req, id, model) => fromOpenAIBody(json, req, id, model),
  });
}
