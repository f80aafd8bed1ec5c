/**
 * The OpenAI-compatible adapter against a fake server on loopback that speaks the real wire
 * format: exact request bodies, compatible servers' deviations, retries, timeouts, secrets.
 */
import { inspect } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../../src/contracts/broker-protocol.js';
import { FusionError } from '../../../src/errors.js';
import { credentialFromEnv, type Credential } from '../../../src/models/credentials.js';
import { createOpenAIProvider } from '../../../src/models/openai.js';
import { openaiCompletion, openaiError, openaiText, openaiToolCalls, startFakeOpenAI, type FakeOpenAI } from './fake-openai.js';
import { capturedLogger, LS_TOOL, READ_TOOL, rejectionOf, request, SENTINEL_KEY, settings, type CapturedLog } from './helpers.js';
import { waitFor } from '../../helpers/wait.js';

let fake: FakeOpenAI;
let cap: CapturedLog;
const key = (): Credential => credentialFromEnv('OPENAI_API_KEY', { OPENAI_API_KEY: SENTINEL_KEY })!;

beforeEach(async () => {
  fake = await startFakeOpenAI({ apiKey: SENTINEL_KEY });
  cap = capturedLogger();
});

afterEach(async () => {
  await fake.close();
  // No test may leak the key into a log line.
  expect(cap.text()).not.toContain(SENTINEL_KEY);
});

describe('openai adapter: tool-call conversation', () => {
  it('round-trips tool calls and tool results with the exact wire bodies', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl, { maxOutputTokens: 512 }), key(), cap.log);
    fake.script(
      openaiToolCalls([{ id: 'call_a', name: 'ls', arguments: '{"path":"."}' }, { id: 'call_b', name: 'read', arguments: '{"path":"src/main.ts"}' }]),
      openaiText('main is defined in src/main.ts:1', { usage: { prompt_tokens: 120, completion_tokens: 12 } }),
    );
    const first = await p.complete(request());
    expect(first).toEqual({
      content: '',
      toolCalls: [
        { id: 'call_a', name: 'ls', arguments: '{"path":"."}' },
        { id: 'call_b', name: 'read', arguments: '{"path":"src/main.ts"}' },
      ],
      stopReason: 'tool_calls',
      usage: { inputTokens: 11, outputTokens: 7 },
      model: 'fake-model',
    });
    const messages: ChatMessage[] = [
      ...request().messages,
      { role: 'assistant', content: '', tool_calls: first.toolCalls },
      { role: 'tool', tool_call_id: 'call_a', content: 'src/\nREADME.md' },
      { role: 'tool', tool_call_id: 'call_b', content: 'export function main() {}' },
    ];
    const second = await p.complete(request({ messages }));
    expect(second.content).toBe('main is defined in src/main.ts:1');
    expect(second.stopReason).toBe('stop');
    expect(second.usage).toEqual({ inputTokens: 120, outputTokens: 12 });

    const [b1, b2] = fake.bodies();
    const tools = [
      { type: 'function', function: { name: 'ls', description: LS_TOOL.description, parameters: LS_TOOL.parameters } },
      { type: 'function', function: { name: 'read', description: READ_TOOL.description, parameters: READ_TOOL.parameters } },
    ];
    expect(b1).toEqual({
      model: 'fake-model',
      messages: [
        { role: 'system', content: 'You are a careful investigator.' },
        { role: 'user', content: 'Where is main defined?' },
      ],
      tools,
      max_tokens: 512,
    });
    expect(b2).toEqual({
      model: 'fake-model',
      messages: [
        { role: 'system', content: 'You are a careful investigator.' },
        { role: 'user', content: 'Where is main defined?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'ls', arguments: '{"path":"."}' } },
            { id: 'call_b', type: 'function', function: { name: 'read', arguments: '{"path":"src/main.ts"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_a', content: 'src/\nREADME.md' },
        { role: 'tool', tool_call_id: 'call_b', content: 'export function main() {}' },
      ],
      tools,
      max_tokens: 512,
    });
    const r = fake.requests[0]!;
    expect(r.path).toBe('/v1/chat/completions');
    expect(r.headers.authorization).toBe(`Bearer ${SENTINEL_KEY}`);
    expect(r.headers['content-type']).toBe('application/json');
  });

  it('omits tools when none are offered and sends no Authorization without a key', async () => {
    const open = await startFakeOpenAI();
    try {
      const p = createOpenAIProvider(settings(open.baseUrl), undefined, cap.log);
      await p.complete(request({ tools: [], maxOutputTokens: 64 }));
      expect(open.bodies()[0]).toEqual({ model: 'fake-model', messages: request().messages, max_tokens: 64 });
      expect(open.requests[0]!.headers.authorization).toBeUndefined();
    } finally {
      await open.close();
    }
  });

  it('tolerates object-valued arguments and missing ids (deterministic call_<turn>_<i>)', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl), key(), cap.log);
    const reply = openaiToolCalls([
      { name: 'ls', arguments: { path: 'src' } },
      { name: 'read', arguments: { path: 'a.ts' } },
    ]);
    fake.script(reply, reply);
    const prior: ChatMessage[] = [...request().messages, { role: 'assistant', content: 'thinking' }, { role: 'user', content: 'go on' }];
    const a = await p.complete(request({ messages: prior }));
    const b = await p.complete(request({ messages: prior }));
    expect(a.toolCalls).toEqual([
      { id: 'call_1_0', name: 'ls', arguments: '{"path":"src"}' },
      { id: 'call_1_1', name: 'read', arguments: '{"path":"a.ts"}' },
    ]);
    expect(b.toolCalls).toEqual(a.toolCalls);
    expect(a.stopReason).toBe('tool_calls');
  });

  it('reads a tool call printed as text (<tool_call> tags, bare JSON) only when tools were offered, whatever tool it names', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl), key(), cap.log);
    fake.script(
      openaiText('Let me look.\n<tool_call>\n{"name": "ls", "arguments": {"path": "."}}\n</tool_call>', { finishReason: 'stop' }),
      openaiText('{"name": "read", "parameters": {"path": "README.md"}}'),
      openaiText('{"name": "read", "parameters": {"path": "README.md"}}'),
      openaiText('<tool_call>{"name": "bash", "arguments": {"cmd": "rm -rf /"}}</tool_call>'),
    );
    const tagged = await p.complete(request());
    expect(tagged).toMatchObject({ content: 'Let me look.', toolCalls: [{ id: 'call_0_0', name: 'ls', arguments: '{"path":"."}' }], stopReason: 'tool_calls' });
    const bare = await p.complete(request());
    expect(bare).toMatchObject({ content: '', toolCalls: [{ id: 'call_0_0', name: 'read', arguments: '{"path":"README.md"}' }], stopReason: 'tool_calls' });
    const noTools = await p.complete(request({ tools: [] }));
    expect(noTools).toMatchObject({ content: '{"name": "read", "parameters": {"path": "README.md"}}', toolCalls: [], stopReason: 'stop' });
    // A tool that was not offered is still a call: the agent rejects it with an error result
    // (never runs it), so the model can correct itself instead of its call becoming its answer.
    const notOffered = await p.complete(request());
    expect(notOffered.toolCalls).toEqual([{ id: 'call_0_0', name: 'bash', arguments: '{"cmd":"rm -rf /"}' }]);
    expect(notOffered.content).toBe('');
  });
});

describe('openai adapter: stop reasons and usage', () => {
  it('maps length, content_filter, refusal and missing usage', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl), key(), cap.log);
    fake.script(
      openaiText('cut off mid', { finishReason: 'length' }),
      openaiText('', { finishReason: 'content_filter' }),
      openaiCompletion({ content: null, refusal: 'I cannot help with that.' }),
      openaiText('twelve chars', { usage: null, finishReason: null }),
      openaiCompletion({ content: [{ type: 'text', text: 'part one, ' }, { type: 'text', text: 'part two' }] as unknown as string }),
    );
    expect((await p.complete(request())).stopReason).toBe('length');
    expect((await p.complete(request())).stopReason).toBe('refusal');
    const refused = await p.complete(request());
    expect(refused).toMatchObject({ stopReason: 'refusal', content: 'I cannot help with that.', toolCalls: [] });
    const estimated = await p.complete(request());
    expect(estimated.stopReason).toBe('stop');
    expect(estimated.usage.outputTokens).toBe(3);
    expect(estimated.usage.inputTokens).toBeGreaterThan(10);
    expect((await p.complete(request())).content).toBe('part one, part two');
  });
});

describe('openai adapter: retries, timeouts, malformed bodies', () => {
  it('honours retry-after on 429 (seconds), within its bound', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl), key(), cap.log);
    fake.script(openaiError(429, 'Rate limit reached', { 'retry-after': '1' }), openaiText('after the wait'));
    const started = Date.now();
    const res = await p.complete(request());
    const gap = fake.requests[1]!.receivedAt - fake.requests[0]!.receivedAt;
    expect(res.content).toBe('after the wait');
    expect(gap).toBeGreaterThanOrEqual(950);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(cap.text()).toContain('model request failed; retrying');
  });

  it('caps a huge retry-after at maxRetryAfterMs (HTTP-date form too)', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl, { retry: { baseDelayMs: 20, maxDelayMs: 50, maxRetryAfterMs: 300 } }), key(), cap.log);
    fake.script(
      openaiError(429, 'slow down', { 'retry-after': '3600' }),
      openaiError(503, 'overloaded', { 'retry-after': new Date(Date.now() + 3_600_000).toUTCString() }),
      openaiText('ok now'),
    );
    const started = Date.now();
    expect((await p.complete(request())).content).toBe('ok now');
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(550);
    expect(elapsed).toBeLessThan(2_500);
  });

  it('does not start a retry wait that would pass the request deadline', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl, { timeoutMs: 1_000, retry: { maxRetryAfterMs: 60_000 } }), key(), cap.log);
    fake.script(openaiError(429, 'Rate limit reached', { 'retry-after': '30' }));
    const started = Date.now();
    const err = await rejectionOf(p.complete(request()));
    expect(Date.now() - started).toBeLessThan(900);
    expect(err).toBeInstanceOf(FusionError);
    expect(err.code).toBe('model_error');
    expect(err.message).toContain('HTTP 429');
    expect(err.message).toContain('would pass the 1000 ms deadline');
    expect(fake.requests).toHaveLength(1);
  });

  it('retries a 500 and succeeds; gives up after maxAttempts', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl, { maxAttempts: 3 }), key(), cap.log);
    fake.script(openaiError(500, 'boom'), openaiText('recovered'));
    expect((await p.complete(request())).content).toBe('recovered');
    expect(fake.bodies()).toHaveLength(2);
    expect(fake.bodies()[1]).toEqual(fake.bodies()[0]);

    fake.script(openaiError(502, 'bad gateway'), openaiError(503, 'unavailable'), openaiError(500, 'still broken'), openaiText('never reached'));
    const err = await rejectionOf(p.complete(request()));
    expect(err.code).toBe('model_error');
    expect(err.message).toBe('openai:fake-model: HTTP 500 from ' + new URL(fake.baseUrl).host + ': still broken (gave up after 3 attempts)');
    expect(err.details).toMatchObject({ provider: 'openai:fake-model', status: 500, attempts: 3 });
    expect(fake.pending()).toBe(1);
  });

  it('does not retry a 400 and reports the upstream message', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl), key(), cap.log);
    fake.script(openaiError(400, "Invalid parameter: 'tools[0].function.name'", {}, 'invalid_request_error'));
    const err = await rejectionOf(p.complete(request()));
    expect(err.message).toContain("Invalid parameter: 'tools[0].function.name'");
    expect(err.retryable).toBe(false);
    expect(fake.requests).toHaveLength(1);
  });

  it('a hung provider (no headers) fails with model_error within the timeout', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl, { timeoutMs: 400 }), key(), cap.log);
    fake.script({ hang: 'headers' });
    const started = Date.now();
    const err = await rejectionOf(p.complete(request()));
    const elapsed = Date.now() - started;
    expect(err.code).toBe('model_error');
    expect(err.message).toBe('openai:fake-model: no complete response within the 400 ms timeout');
    expect(elapsed).toBeGreaterThanOrEqual(380);
    expect(elapsed).toBeLessThan(1_400);
  });

  it('a provider that stalls mid-body also fails within the timeout', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl, { timeoutMs: 400 }), key(), cap.log);
    fake.script({ ...openaiText('this body never finishes'), hang: 'body' });
    const started = Date.now();
    const err = await rejectionOf(p.complete(request()));
    expect(err.code).toBe('model_error');
    expect(Date.now() - started).toBeLessThan(1_400);
  });

  it('a caller abort stops the request at once, not retryable', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl), key(), cap.log);
    fake.script({ hang: 'headers' });
    const controller = new AbortController();
    const before = fake.requests.length;
    // Aborted once the request is with the server (which never answers): mid-request.
    void waitFor('the request to reach the fake server', () => fake.requests.length > before).then(() => controller.abort());
    const err = await rejectionOf(p.complete(request({ signal: controller.signal })));
    expect(fake.requests.length).toBe(before + 1);
    expect(err.code).toBe('model_error');
    expect(err.message).toContain('cancelled');
    expect(err.retryable).toBe(false);
  });

  it('a connection refused is retried, then reported as a network error', async () => {
    const dead = await startFakeOpenAI();
    const url = dead.baseUrl;
    await dead.close();
    const p = createOpenAIProvider(settings(url, { maxAttempts: 2 }), undefined, cap.log);
    const err = await rejectionOf(p.complete(request()));
    expect(err.code).toBe('model_error');
    expect(err.message).toMatch(/network error reaching 127\.0\.0\.1:\d+: .*ECONNREFUSED.*\(gave up after 2 attempts\)/);
  });

  it('a malformed JSON body is a model_error, not retried', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl), key(), cap.log);
    fake.script({ status: 200, headers: { 'content-type': 'application/json' }, raw: '{"choices": [ {"message": ' });
    const err = await rejectionOf(p.complete(request()));
    expect(err.code).toBe('model_error');
    expect(err.message).toContain('malformed JSON body');
    expect(fake.requests).toHaveLength(1);
  });

  it('a 200 with an error envelope or no choices is a model_error', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl), key(), cap.log);
    fake.script({ json: { error: { message: 'model not loaded' } } }, { json: { choices: [] } });
    expect((await rejectionOf(p.complete(request()))).message).toContain('model not loaded');
    expect((await rejectionOf(p.complete(request()))).message).toContain('no choices[0].message');
  });
});

describe('openai adapter: the key never leaks', () => {
  it('redacts the key from upstream error bodies, messages, details and logs', async () => {
    const wrong = credentialFromEnv('K', { K: SENTINEL_KEY })!;
    const strict = await startFakeOpenAI({ apiKey: 'sk-the-right-key-0000000000000' });
    try {
      const p = createOpenAIProvider(settings(strict.baseUrl), wrong, cap.log);
      const err = await rejectionOf(p.complete(request()));
      expect(err.code).toBe('model_error');
      expect(err.message).toContain('HTTP 401');
      expect(err.message).toContain('Incorrect API key provided');
      // The fake echoed the key it got in full; none of it may survive.
      expect(strict.requests[0]!.headers.authorization).toBe(`Bearer ${SENTINEL_KEY}`);
      const everything = [err.message, JSON.stringify((err as FusionError).details), JSON.stringify((err as FusionError).toEnvelope()), inspect(err, { depth: 10 })];
      for (const text of everything) expect(text).not.toContain(SENTINEL_KEY);
      expect(err.message).not.toContain('SENTINEL');
    } finally {
      await strict.close();
    }
  });

  it('redacts a key echoed in a retried 5xx body and in the warn log', async () => {
    const p = createOpenAIProvider(settings(fake.baseUrl, { maxAttempts: 2 }), key(), cap.log);
    fake.script(openaiError(500, `upstream failed for Authorization: Bearer ${SENTINEL_KEY}`), openaiError(500, `key ${SENTINEL_KEY} rejected`));
    const err = await rejectionOf(p.complete(request()));
    expect(err.message).not.toContain(SENTINEL_KEY);
    expect(err.message).toContain('[redacted]');
  });

  it('the provider object shows no key when serialised or inspected', () => {
    const p = createOpenAIProvider(settings(fake.baseUrl), key(), cap.log);
    expect(JSON.stringify(p)).not.toContain(SENTINEL_KEY);
    expect(inspect(p, { depth: 10, showHidden: true })).not.toContain(SENTINEL_KEY);
    expect(JSON.parse(JSON.stringify(p))).toMatchObject({ id: 'openai:fake-model', engine: 'openai', keySource: 'env OPENAI_API_KEY' });
    cap.log.info({ provider: p, desc: p.describe() }, 'provider built');
  });
});
