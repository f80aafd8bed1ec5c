/**
 * A fake Anthropic Messages API server on loopback, speaking the real wire format:
 * `POST /v1/messages`, `x-api-key` checked when `apiKey` is set (401 `authentication_error`,
 * echoing the received key so tests prove the adapter redacts it), `anthropic-version`
 * required (400 otherwise, as the real API does).
 *
 * Reusable: script replies with `anthropicText`, `anthropicToolUse`, `anthropicMessage`,
 * `anthropicError` or a function of the request; read `requests` / `bodies()`.
 *
 *   const fake = await startFakeAnthropic({ apiKey: 'sk-ant-test' });
 *   fake.script(anthropicToolUse([{ id: 'toolu_1', name: 'ls', input: {} }]), anthropicText('done'));
 *   // provider baseUrl: fake.baseUrl   (http://127.0.0.1:<port>)
 */
import { startFakeServer, type FakeReply, type FakeServer, type FakeStep } from './fake-server.js';

export type { FakeReply, FakeStep, RecordedRequest } from './fake-server.js';

export interface FakeAnthropic extends FakeServer {
  /** `http://127.0.0.1:<port>` — the provider's baseUrl. */
  baseUrl: string;
}

export interface MessageOptions {
  /** Raw content blocks; default built from `text` and `toolUses`. */
  content?: unknown[];
  text?: string;
  toolUses?: Array<{ id?: string; name: string; input: unknown }>;
  /** Default: `tool_use` with tool uses, else `end_turn`. `null` sends null. */
  stopReason?: string | null;
  /** `null` omits usage. */
  usage?: Record<string, number> | null;
  model?: string;
}

let counter = 0;

export function anthropicMessage(o: MessageOptions = {}): FakeReply {
  const uses = o.toolUses ?? [];
  const content =
    o.content ??
    [
      ...(o.text === undefined || o.text === '' ? [] : [{ type: 'text', text: o.text }]),
      ...uses.map((u) => ({ type: 'tool_use', ...(u.id === undefined ? {} : { id: u.id }), name: u.name, input: u.input })),
    ];
  return {
    json: {
      id: `msg_fake_${++counter}`,
      type: 'message',
      role: 'assistant',
      model: o.model ?? 'claude-fake',
      content,
      stop_reason: o.stopReason === undefined ? (uses.length > 0 ? 'tool_use' : 'end_turn') : o.stopReason,
      stop_sequence: null,
      ...(o.usage === null ? {} : { usage: o.usage ?? { input_tokens: 21, output_tokens: 9 } }),
    },
  };
}

export const anthropicText = (text: string, o: Omit<MessageOptions, 'text'> = {}): FakeReply => anthropicMessage({ ...o, text });

export const anthropicToolUse = (toolUses: NonNullable<MessageOptions['toolUses']>, o: Omit<MessageOptions, 'toolUses'> = {}): FakeReply =>
  anthropicMessage({ ...o, toolUses });

export function anthropicError(status: number, type: string, message: string, headers: Record<string, string> = {}): FakeReply {
  return { status, headers, json: { type: 'error', error: { type, message } } };
}

export async function startFakeAnthropic(options: { apiKey?: string; fallback?: FakeStep } = {}): Promise<FakeAnthropic> {
  const server = await startFakeServer({
    route: '/v1/messages',
    fallback: options.fallback ?? anthropicText('ok'),
    gate: (req) => {
      if (options.apiKey !== undefined && req.headers['x-api-key'] !== options.apiKey) {
        return anthropicError(401, 'authentication_error', `invalid x-api-key: ${String(req.headers['x-api-key'] ?? '')}`);
      }
      if (req.headers['anthropic-version'] === undefined) return anthropicError(400, 'invalid_request_error', 'anthropic-version: header is required');
      return null;
    },
    notFound: (req) => anthropicError(404, 'not_found_error', `Not found: ${req.method} ${req.path}`),
  });
  return { ...server, baseUrl: server.origin };
}
