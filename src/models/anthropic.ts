/**
 * Anthropic Messages API adapter (`POST {baseUrl}/v1/messages`, `x-api-key`,
 * `anthropic-version: 2023-06-01`).
 *
 * Mapping from the broker's OpenAI-shaped conversation:
 * - system messages → the top-level `system` string (joined by a blank line);
 * - assistant tool calls → `tool_use` blocks `{id, name, input}` after any text block;
 * - tool results → `tool_result` blocks `{tool_use_id, content}` in a user message; consecutive
 *   user-side messages (tool results, then perhaps a user note) merge into ONE user message,
 *   because every result of one assistant turn must come back in the next user turn;
 * - `stop_reason`: end_turn/stop_sequence/pause_turn → stop (tool_calls when tool_use blocks
 *   came back), tool_use → tool_calls, max_tokens/model_context_window_exceeded → length,
 *   refusal → refusal. `thinking` blocks are dropped.
 * Usage: input = input_tokens + cache creation + cache reads (every token the model read),
 * output = output_tokens; estimated only when absent.
 */
import type { ChatMessage, StopReason, ToolCall } from '../contracts/broker-protocol.js';
import { MODEL_DEFAULTS } from '../contracts/model-config.js';
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

export const ANTHROPIC_VERSION = '2023-06-01';

type Json = Record<string, unknown>;
type Block = Json;
interface WireMessage {
  role: 'user' | 'assistant';
  content: string | Block[];
}

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

function asBlocks(content: string | Block[]): Block[] {
  return typeof content === 'string' ? (content === '' ? [] : [{ type: 'text', text: content }]) : content;
}

/** Arguments are JSON text in our protocol; `input` must be an object on this wire. */
function toolInput(args: string): Json {
  try {
    const parsed: unknown = JSON.parse(args === '' ? '{}' : args);
    return isObject(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

function toWireMessage(m: ChatMessage, index: number): WireMessage | null {
  switch (m.role) {
    case 'assistant': {
      const calls = m.tool_calls ?? [];
      if (calls.length === 0) return m.content === '' ? null : { role: 'assistant', content: m.content };
      return {
        role: 'assistant',
        content: [
          ...(m.content === '' ? [] : [{ type: 'text', text: m.content }]),
          ...calls.map((c) => ({ type: 'tool_use', id: c.id, name: c.name, input: toolInput(c.arguments) })),
        ],
      };
    }
    case 'tool':
      if (m.tool_call_id === undefined || m.tool_call_id === '') {
        throw new FusionError('model_error', `messages[${index}]: a tool result must carry tool_call_id`, { retryable: false });
      }
      return { role: 'user', content: [{ type: 'tool_result', tool_use_id: m.tool_call_id, content: m.content }] };
    default:
      return { role: 'user', content: m.content };
  }
}

export function toAnthropicBody(req: ModelRequest, settings: Pick<RemoteModelSettings, 'model' | 'maxOutputTokens'>): Json {
  const system = req.messages
    .filter((m) => m.role === 'system' && m.content !== '')
    .map((m) => m.content)
    .join('\n\n');
  const messages: WireMessage[] = [];
  req.messages.forEach((m, i) => {
    if (m.role === 'system') return;
    const wire = toWireMessage(m, i);
    if (wire === null) return;
    const prev = messages[messages.length - 1];
    if (prev !== undefined && prev.role === 'user' && wire.role === 'user') {
      prev.content = [...asBlocks(prev.content), ...asBlocks(wire.content)];
      return;
    }
    messages.push(wire);
  });
  return {
    model: settings.model,
    max_tokens: effectiveMaxTokens(req.maxOutputTokens, settings.maxOutputTokens) ?? MODEL_DEFAULTS.anthropicMaxOutputTokens,
    ...(system === '' ? {} : { system }),
    messages,
    ...(req.tools.length > 0 ? { tools: req.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters })) } : {}),
  };
}

function stopReasonOf(reason: unknown, hasCalls: boolean): StopReason {
  switch (reason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'refusal':
      return 'refusal';
    default:
      return hasCalls ? 'tool_calls' : 'stop';
  }
}

function count(usage: Json, name: string): number | undefined {
  const v = usage[name];
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.round(v) : undefined;
}

function bad(message: string): FusionError {
  return new FusionError('model_error', message, { retryable: false });
}

export function fromAnthropicBody(body: unknown, req: ModelRequest, providerId: string, configuredModel: string): ModelResponse {
  if (!isObject(body)) throw bad(`${providerId}: response body is not a JSON object`);
  if (body.type === 'error') {
    const message = isObject(body.error) && typeof body.error.message === 'string' ? body.error.message : 'unknown error';
    throw bad(`${providerId}: server returned an error: ${redactSecrets(message).slice(0, 500)}`);
  }
  if (!Array.isArray(body.content)) throw bad(`${providerId}: response has no content array`);
  const turn = req.messages.filter((m) => m.role === 'assistant').length;
  let text = '';
  const toolCalls: ToolCall[] = [];
  const seen = new Set<string>();
  for (const block of body.content) {
    if (!isObject(block)) continue;
    if (block.type === 'text' && typeof block.text === 'string') text += block.text;
    else if (block.type === 'tool_use') {
      const i = toolCalls.length;
      if (typeof block.name !== 'string' || block.name === '') throw bad(`${providerId}: tool_use block ${i} has no name`);
      const input = block.input === undefined || block.input === null ? {} : block.input;
      let id = typeof block.id === 'string' && block.id !== '' ? block.id : `call_${turn}_${i}`;
      if (seen.has(id)) id = `call_${turn}_${i}`;
      seen.add(id);
      toolCalls.push({ id, name: block.name, arguments: typeof input === 'string' ? input : JSON.stringify(input) });
    }
  }
  const usage = isObject(body.usage) ? body.usage : {};
  const reported = count(usage, 'input_tokens');
  const inputTokens =
    reported === undefined
      ? estimateTokens(req.messages.map((m) => m.content + (m.tool_calls ?? []).map((c) => c.name + c.arguments).join('')).join('') + JSON.stringify(req.tools))
      : reported + (count(usage, 'cache_creation_input_tokens') ?? 0) + (count(usage, 'cache_read_input_tokens') ?? 0);
  const outputTokens = count(usage, 'output_tokens') ?? estimateTokens(text + toolCalls.map((c) => c.name + c.arguments).join(''));
  return {
    content: text,
    toolCalls,
    stopReason: stopReasonOf(body.stop_reason, toolCalls.length > 0),
    usage: { inputTokens, outputTokens },
    model: typeof body.model === 'string' && body.model !== '' ? body.model : configuredModel,
  };
}

export function createAnthropicProvider(settings: RemoteModelSettings, credential: Credential | undefined, log: Logger): ConfiguredProvider {
  return createRemoteProvider({
    engine: 'anthropic',
    settings,
    credential,
    log,
    path: '/v1/messages',
    headers: (key) => ({ 'anthropic-version': ANTHROPIC_VERSION, ...(key === undefined ? {} : { 'x-api-key': key }) }),
    toBody: (req) => toAnthropicBody(req, settings),
    fromBody: (json, req, id, model) => fromAnthropicBody(json, req, id, model),
  });
}
