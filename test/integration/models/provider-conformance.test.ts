/**
 * One conformance suite for every remote ModelProvider (docs/architecture.md#tests): the same script,
 * each against its own fake server, must give port-shaped answers and the same failure modes.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ModelResponse } from '../../../src/models/port.js';
import { createAnthropicProvider } from '../../../src/models/anthropic.js';
import { credentialFromEnv } from '../../../src/models/credentials.js';
import type { ConfiguredProvider, RemoteModelSettings } from '../../../src/models/remote-provider.js';
import { createOpenAIProvider } from '../../../src/models/openai.js';
import { anthropicError, anthropicText, anthropicToolUse, startFakeAnthropic } from './fake-anthropic.js';
import { openaiError, openaiText, openaiToolCalls, startFakeOpenAI } from './fake-openai.js';
import type { FakeReply, FakeServer } from './fake-server.js';
import { capturedLogger, rejectionOf, request, SENTINEL_KEY, settings } from './helpers.js';

interface Subject {
  name: string;
  start(): Promise<FakeServer & { baseUrl: string }>;
  create(s: RemoteModelSettings, log: ReturnType<typeof capturedLogger>['log']): ConfiguredProvider;
  text(t: string): FakeReply;
  toolCall(name: string, args: Record<string, unknown>): FakeReply;
  rateLimited(): FakeReply;
}

const cred = credentialFromEnv('K', { K: SENTINEL_KEY });

const SUBJECTS: Subject[] = [
  {
    name: 'openai',
    start: () => startFakeOpenAI({ apiKey: SENTINEL_KEY }),
    create: (s, log) => createOpenAIProvider(s, cred, log),
    text: (t) => openaiText(t),
    toolCall: (name, args) => openaiToolCalls([{ id: 'c-1', name, arguments: JSON.stringify(args) }]),
    rateLimited: () => openaiError(429, `rate limited for key ${SENTINEL_KEY}`, { 'retry-after': '0' }),
  },
  {
    name: 'anthropic',
    start: () => startFakeAnthropic({ apiKey: SENTINEL_KEY }),
    create: (s, log) => createAnthropicProvider(s, cred, log),
    text: (t) => anthropicText(t),
    toolCall: (name, args) => anthropicToolUse([{ id: 'c-1', name, input: args }]),
    rateLimited: () => anthropicError(429, 'rate_limit_error', `rate limited for key ${SENTINEL_KEY}`, { 'retry-after': '0' }),
  },
];

function expectPortShape(res: ModelResponse): void {
  expect(typeof res.content).toBe('string');
  expect(['stop', 'tool_calls', 'length', 'refusal']).toContain(res.stopReason);
  for (const n of [res.usage.inputTokens, res.usage.outputTokens]) {
    expect(Number.isSafeInteger(n) && n >= 0).toBe(true);
  }
  expect(res.model.length).toBeGreaterThan(0);
  const ids = res.toolCalls.map((c) => c.id);
  expect(new Set(ids).size).toBe(ids.length);
  for (const c of res.toolCalls) {
    expect(c.id.length).toBeGreaterThan(0);
    expect(typeof JSON.parse(c.arguments)).toBe('object');
  }
}

describe.each(SUBJECTS)('ModelProvider conformance: $name', (subject) => {
  let fake: (FakeServer & { baseUrl: string }) | undefined;
  afterEach(async () => {
    await fake?.close();
    fake = undefined;
  });

  it('answers text, tool calls, retries a 429 and times out a hang, with port-shaped results and no key anywhere', async () => {
    fake = await subject.start();
    const cap = capturedLogger();
    const p = subject.create(settings(fake.baseUrl, { timeoutMs: 500 }), cap.log);
    expect(p.id).toBe(`${subject.name}:fake-model`);
    expect(p.engine).toBe(subject.name);

    fake.script(subject.text('plain answer'), subject.toolCall('ls', { path: '.' }), subject.rateLimited(), subject.text('after 429'), { hang: 'headers' });
    const text = await p.complete(request());
    expectPortShape(text);
    expect(text).toMatchObject({ content: 'plain answer', toolCalls: [], stopReason: 'stop' });

    const call = await p.complete(request());
    expectPortShape(call);
    expect(call).toMatchObject({ stopReason: 'tool_calls', toolCalls: [{ id: 'c-1', name: 'ls', arguments: '{"path":"."}' }] });

    expect((await p.complete(request())).content).toBe('after 429');

    const err = await rejectionOf(p.complete(request()));
    expect(err.code).toBe('model_error');
    expect(cap.text()).not.toContain(SENTINEL_KEY);
    expect(cap.text()).toContain('retrying');
  });
});
