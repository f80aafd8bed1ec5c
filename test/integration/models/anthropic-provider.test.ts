/**
 * The Anthropic Messages adapter against a fake server on loopback that speaks the real wire
 * format: exact request bodies and headers, stop reasons, usage, retries, timeouts, secrets.
 */
import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../../src/contracts/broker-protocol.js';
import { createAnthropicProvider } from '../../../src/models/anthropic.js';
import { credentialFromEnv, type Credential } from '../../../src/models/credentials.js';
import { anthropicError, anthropicMessage, anthropicText, anthropicToolUse, startFakeAnthropic, type FakeAnthropic } from './fake-anthropic.js';
import { capturedLogger, LS_TOOL, READ_TOOL, rejectionOf, request, SENTINEL_KEY, settings, type CapturedLog } from './helpers.js';

let fake: FakeAnthropic;
let cap: CapturedLog;
const key = (): Credential => credentialFromEnv('ANTHROPIC_API_KEY', { ANTHROPIC_API_KEY: SENTINEL_KEY })!;

beforeEach(async () => {
  fake = await startFakeAnthropic({ apiKey: SENTINEL_KEY });
  cap = capturedLogger();
});

afterEach(async () => {
  await fake.close();
  expect(cap.text()).not.toContain(SENTINEL_KEY);
});

describe('anthropic adapter: tool-use conversation', () => {
  it('round-trips tool_use and tool_result blocks with the exact wire bodies and headers', async () => {
    const p = createAnthropicProvider(settings(fake.baseUrl, { model: 'claude-fake' }), key(), cap.log);
    fake.script(
      anthropicToolUse(
        [
          { id: 'toolu_01', name: 'ls', input: { path: '.' } },
          { id: 'toolu_02', name: 'read', input: { path: 'src/main.ts' } },
        ],
        { text: 'I will look around.', usage: { input_tokens: 100, output_tokens: 20, cache_read_input_tokens: 50 } },
      ),
      anthropicText('main is defined in src/main.ts:1'),
    );
    const first = await p.complete(request());
    expect(first).toEqual({
      content: 'I will look around.',
      toolCalls: [
        { id: 'toolu_01', name: 'ls', arguments: '{"path":"."}' },
        { id: 'toolu_02', name: 'read', arguments: '{"path":"src/main.ts"}' },
      ],
      stopReason: 'tool_calls',
      usage: { inputTokens: 150, outputTokens: 20 },
      model: 'claude-fake',
    });
    const messages: ChatMessage[] = [
      ...request().messages,
      { role: 'assistant', content: first.content, tool_calls: first.toolCalls },
      { role: 'tool', tool_call_id: 'toolu_01', content: 'src/\nREADME.md' },
      { role: 'tool', tool_call_id: 'toolu_02', content: 'export function main() {}' },
      { role: 'user', content: 'Answer now.' },
    ];
    const second = await p.complete(request({ messages, maxOutputTokens: 777 }));
    expect(second).toMatchObject({ content: 'main is defined in src/main.ts:1', stopReason: 'stop', toolCalls: [], usage: { inputTokens: 21, outputTokens: 9 } });

    const tools = [
      { name: 'ls', description: LS_TOOL.description, input_schema: LS_TOOL.parameters },
      { name: 'read', description: READ_TOOL.description, input_schema: READ_TOOL.parameters },
    ];
    const [b1, b2] = fake.bodies();
    expect(b1).toEqual({
      model: 'claude-fake',
      max_tokens: 8192,
      system: 'You are a careful investigator.',
      messages: [{ role: 'user', content: 'Where is main defined?' }],
      tools,
    });
    expect(b2).toEqual({
      model: 'claude-fake',
      max_tokens: 777,
      system: 'You are a careful investigator.',
      messages: [
        { role: 'user', content: 'Where is main defined?' },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'I will look around.' },
            { type: 'tool_use', id: 'toolu_01', name: 'ls', input: { path: '.' } },
            { type: 'tool_use', id: 'toolu_02', name: 'read', input: { path: 'src/main.ts' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_01', content: 'src/\nREADME.md' },
            { type: 'tool_result', tool_use_id: 'toolu_02', content: 'export function main() {}' },
            { type: 'text', text: 'Answer now.' },
          ],
        },
      ],
      tools,
    });
    const r = fake.requests[0]!;
    expect(r.path).toBe('/v1/messages');
    expect(r.headers['x-api-key']).toBe(SENTINEL_KEY);
    expect(r.headers['anthropic-version']).toBe('2023-06-01');
    expect(r.headers.authorization).toBeUndefined();
  });

  it('synthesises missing tool_use ids deterministically and omits tools/system when absent', async () => {
    const p = createAnthropicProvider(settings(fake.baseUrl), key(), cap.log);
    fake.script(anthropicToolUse([{ name: 'ls', input: { path: 'x' } }]));
    const res = await p.complete(request({ messages: [{ role: 'user', content: 'hi' }], tools: [] }));
    expect(res.toolCalls).toEqual([{ id: 'call_0_0', name: 'ls', arguments: '{"path":"x"}' }]);
    expect(fake.bodies()[0]).toEqual({ model: 'fake-model', max_tokens: 8192, messages: [{ role: 'user', content: 'hi' }] });
  });
});

describe('anthropic adapter: stop reasons and usage', () => {
  it('maps max_tokens → length, refusal → refusal, end_turn → stop, thinking dropped, usage estimated when absent', async () => {
    const p = createAnthropicProvider(settings(fake.baseUrl), key(), cap.log);
    fake.script(
      anthropicText('cut', { stopReason: 'max_tokens' }),
      anthropicMessage({ content: [], stopReason: 'refusal' }),
      anthropicMessage({ content: [{ type: 'thinking', thinking: 'hmm', signature: 'x' }, { type: 'text', text: 'eight ch' }], usage: null }),
      anthropicText('x', { stopReason: 'model_context_window_exceeded' }),
    );
    expect((await p.complete(request())).stopReason).toBe('length');
    expect((await p.complete(request())).stopReason).toBe('refusal');
    const thought = await p.complete(request());
    expect(thought).toMatchObject({ content: 'eight ch', stopReason: 'stop', usage: { outputTokens: 2 } });
    expect(thought.usage.inputTokens).toBeGreaterThan(0);
    expect((await p.complete(request())).stopReason).toBe('length');
  });
});

describe('anthropic adapter: retries and timeouts', () => {
  it('retries 529 overloaded and 429 with an HTTP-date retry-after', async () => {
    const p = createAnthropicProvider(settings(fake.baseUrl), key(), cap.log);
    fake.script(
      anthropicError(529, 'overloaded_error', 'Overloaded'),
      // Dated when served, so the wait measured below is the one the header asked for.
      () => anthropicError(429, 'rate_limit_error', 'Number of requests has exceeded your rate limit', { 'retry-after': new Date(Date.now() + 2_000).toUTCString() }),
      anthropicText('finally'),
    );
    const res = await p.complete(request());
    expect(res.content).toBe('finally');
    const gap = fake.requests[2]!.receivedAt - fake.requests[1]!.receivedAt;
    // HTTP dates have 1 s resolution: the wait is between ~1 and 2 s.
    expect(gap).toBeGreaterThanOrEqual(950);
    expect(gap).toBeLessThan(3_000);
  });

  it('a hung server fails with model_error within the timeout', async () => {
    const p = createAnthropicProvider(settings(fake.baseUrl, { timeoutMs: 300 }), key(), cap.log);
    fake.script({ hang: 'headers' });
    const started = Date.now();
    const err = await rejectionOf(p.complete(request()));
    expect(err.code).toBe('model_error');
    expect(err.message).toBe('anthropic:fake-model: no complete response within the 300 ms timeout');
    expect(Date.now() - started).toBeLessThan(1_300);
  });

  it('a 400 invalid_request_error is not retried; malformed JSON is a model_error', async () => {
    const p = createAnthropicProvider(settings(fake.baseUrl), key(), cap.log);
    fake.script(anthropicError(400, 'invalid_request_error', 'messages.1.content.0: unexpected tool_use_id'), { raw: 'not json' });
    const err = await rejectionOf(p.complete(request()));
    expect(err.message).toContain('HTTP 400');
    expect(err.message).toContain('unexpected tool_use_id');
    expect((await rejectionOf(p.complete(request()))).message).toContain('malformed JSON body');
    expect(fake.requests).toHaveLength(2);
  });
});

describe('anthropic adapter: the key never leaks', () => {
  it('a rejected key echoed back by the server is redacted everywhere', async () => {
    const strict = await startFakeAnthropic({ apiKey: 'sk-ant-the-right-one-000000000' });
    try {
      const p = createAnthropicProvider(settings(strict.baseUrl), key(), cap.log);
      const err = await rejectionOf(p.complete(request()));
      expect(err.code).toBe('model_error');
      expect(err.message).toContain('HTTP 401');
      for (const text of [err.message, JSON.stringify(err.details), inspect(err, { depth: 10 }), JSON.stringify(p), inspect(p, { showHidden: true })]) {
        expect(text).not.toContain(SENTINEL_KEY);
      }
    } finally {
      await strict.close();
    }
  });
});
