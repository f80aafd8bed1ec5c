/**
 * A fake OpenAI-compatible Chat Completions server on loopback, speaking the real wire format:
 * `POST /v1/chat/completions`, `Authorization: Bearer <key>` checked when `apiKey` is set (a
 * wrong key gets OpenAI's 401 envelope, which here echoes the key it received in full — worse
 * than the real server — so tests can prove the adapter redacts it).
 *
 * Reusable: script replies with the builders below (`openaiText`, `openaiToolCalls`,
 * `openaiCompletion`, `openaiError`) or a function of the request, and read `requests` /
 * `bodies()` to check exactly what the adapter sent.
 *
 *   const fake = await startFakeOpenAI({ apiKey: 'sk-test' });
 *   fake.script(openaiToolCalls([{ id: 'c1', name: 'ls', arguments: '{}' }]), openaiText('done'));
 *   // provider baseUrl: fake.baseUrl   (http://127.0.0.1:<port>/v1)
 */
import { startFakeServer, type FakeReply, type FakeServer, type FakeStep } from './fake-server.js';

export type { FakeReply, FakeStep, RecordedRequest } from './fake-server.js';

export interface FakeOpenAI extends FakeServer {
  /** `http://127.0.0.1:<port>/v1` — the provider's baseUrl. */
  baseUrl: string;
}

export interface CompletionOptions {
  content?: string | null;
  toolCalls?: Array<{ id?: string; name: string; arguments: unknown; type?: string }>;
  /** `null` omits the field; default: `tool_calls` when there are tool calls, else `stop`. */
  finishReason?: string | null;
  /** `null` omits usage entirely. */
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  refusal?: string | null;
  model?: string;
  /** Extra message fields (legacy `function_call`, `reasoning_content`, …). */
  messageExtra?: Record<string, unknown>;
}

let counter = 0;

export function openaiCompletion(o: CompletionOptions = {}): FakeReply {
  const calls = o.toolCalls ?? [];
  const message: Record<string, unknown> = {
    role: 'assistant',
    content: o.content === undefined ? (calls.length > 0 ? null : 'ok') : o.content,
    ...(o.refusal === undefined ? {} : { refusal: o.refusal }),
    ...(calls.length > 0
      ? {
          tool_calls: calls.map((c) => ({
            ...(c.id === undefined ? {} : { id: c.id }),
            type: c.type ?? 'function',
            function: { name: c.name, arguments: c.arguments },
          })),
        }
      : {}),
    ...o.messageExtra,
  };
  const finish = o.finishReason === undefined ? (calls.length > 0 ? 'tool_calls' : 'stop') : o.finishReason;
  return {
    json: {
      id: `chatcmpl-fake-${++counter}`,
      object: 'chat.completion',
      created: 1_700_000_000,
      model: o.model ?? 'fake-model',
      choices: [{ index: 0, message, ...(finish === null ? {} : { finish_reason: finish }), logprobs: null }],
      ...(o.usage === null ? {} : { usage: { ...(o.usage ?? { prompt_tokens: 11, completion_tokens: 7 }), total_tokens: (o.usage?.prompt_tokens ?? 11) + (o.usage?.completion_tokens ?? 7) } }),
    },
  };
}

export const openaiText = (content: string, o: Omit<CompletionOptions, 'content' | 'toolCalls'> = {}): FakeReply => openaiCompletion({ ...o, content });

export const openaiToolCalls = (calls: NonNullable<CompletionOptions['toolCalls']>, o: Omit<CompletionOptions, 'toolCalls'> = {}): FakeReply =>
  openaiCompletion({ ...o, toolCalls: calls });

export function openaiError(status: number, message: string, headers: Record<string, string> = {}, type = 'server_error'): FakeReply {
  return { status, headers, json: { error: { message, type, param: null, code: null } } };
}

export async function startFakeOpenAI(options: { apiKey?: string; fallback?: FakeStep } = {}): Promise<FakeOpenAI> {
  const server = await startFakeServer({
    route: '/v1/chat/completions',
    fallback: options.fallback ?? openaiText('ok'),
    gate: (req) => {
      if (options.apiKey === undefined) return null;
      const auth = req.headers.authorization;
      if (auth === `Bearer ${options.apiKey}`) return null;
      const given = auth?.replace(/^Bearer /, '') ?? '';
      return openaiError(401, `Incorrect API key provided: ${given}. You can find your API key at https://platform.openai.com/account/api-keys.`, {}, 'invalid_request_error');
    },
    notFound: (req) => openaiError(404, `Unknown request URL: ${req.method} ${req.path}.`, {}, 'invalid_request_error'),
  });
  return { ...server, baseUrl: `${server.origin}/v1` };
}
