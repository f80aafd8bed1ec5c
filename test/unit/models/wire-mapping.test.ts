/** Pure request/response mapping of both adapters (no network). */
import { describe, expect, it } from 'vitest';
import type { ModelRequest } from '../../../src/models/port.js';
import { fromAnthropicBody, toAnthropicBody } from '../../../src/models/anthropic.js';
import { fromOpenAIBody, maxTokensField, toOpenAIBody, toolCallsFromText } from '../../../src/models/openai.js';

const req = (extra: Partial<ModelRequest> = {}): ModelRequest => ({
  role: 'candidate',
  taskId: 't',
  messages: [{ role: 'user', content: 'q' }],
  tools: [{ name: 'read', description: 'r', parameters: { type: 'object' } }],
  ...extra,
});
const offered = new Set(['read', 'grep']);

describe('openai mapping', () => {
  it('uses max_completion_tokens for api.openai.com, max_tokens elsewhere', () => {
    expect(maxTokensField('https://api.openai.com/v1')).toBe('max_completion_tokens');
    expect(maxTokensField('http://127.0.0.1:11434/v1')).toBe('max_tokens');
    expect(toOpenAIBody(req({ maxOutputTokens: 10 }), { model: 'm', baseUrl: 'https://api.openai.com/v1' })).toMatchObject({ max_completion_tokens: 10 });
    expect(toOpenAIBody(req(), { model: 'm', baseUrl: 'https://api.openai.com/v1' })).not.toHaveProperty('max_completion_tokens');
    // The stage's cap never exceeds the model's configured one.
    expect(toOpenAIBody(req({ maxOutputTokens: 32000 }), { model: 'm', baseUrl: 'http://h', maxOutputTokens: 4000 })).toMatchObject({ max_tokens: 4000 });
    expect(toAnthropicBody(req({ maxOutputTokens: 100 }), { model: 'c', maxOutputTokens: 4000 })).toMatchObject({ max_tokens: 100 });
  });

  it('refuses a tool message without tool_call_id', () => {
    expect(() => toOpenAIBody(req({ messages: [{ role: 'tool', content: 'x' }] }), { model: 'm', baseUrl: 'http://h' })).toThrow('messages[0]: a tool result must carry tool_call_id');
  });

  it('maps legacy function_call, duplicate ids and a leading <think> block', () => {
    const legacy = fromOpenAIBody({ choices: [{ message: { content: null, function_call: { name: 'read', arguments: '{"path":"a"}' } }, finish_reason: 'function_call' }] }, req(), 'p', 'm');
    expect(legacy).toMatchObject({ toolCalls: [{ id: 'call_0_0', name: 'read', arguments: '{"path":"a"}' }], stopReason: 'tool_calls', model: 'm' });
    const dup = fromOpenAIBody(
      { choices: [{ message: { tool_calls: [{ id: 'x', function: { name: 'read', arguments: '' } }, { id: 'x', function: { name: 'grep', arguments: '{}' } }] } }] },
      req(),
      'p',
      'm',
    );
    expect(dup.toolCalls).toEqual([
      { id: 'x', name: 'read', arguments: '{}' },
      { id: 'call_0_1', name: 'grep', arguments: '{}' },
    ]);
    const think = fromOpenAIBody({ choices: [{ message: { content: '<think>\nhmm\n</think>\n\nThe answer.' }, finish_reason: 'stop' }] }, req(), 'p', 'm');
    expect(think.content).toBe('The answer.');
  });

  it('fails clearly on tool calls without a name or with non-JSON arguments', () => {
    expect(() => fromOpenAIBody({ choices: [{ message: { tool_calls: [{ function: { arguments: '{}' } }] } }] }, req(), 'p', 'm')).toThrow('p: tool call 0 has no function name');
    expect(() => fromOpenAIBody({ choices: [{ message: { tool_calls: [{ function: { name: 'read', arguments: 42 } }] } }] }, req(), 'p', 'm')).toThrow('neither JSON text nor an object');
  });

  it('parses text tool calls conservatively', () => {
    expect(toolCallsFromText('<tool_call>{"name":"read","arguments":{"path":"a"}}</tool_call><tool_call>{"name":"grep","arguments":"{\\"q\\":\\"x\\"}"}</tool_call>', offered)).toEqual({
      content: '',
      calls: [
        { name: 'read', arguments: '{"path":"a"}' },
        { name: 'grep', arguments: '{"q":"x"}' },
      ],
    });
    // Unterminated tag at the end (the stop token ate the closing tag).
    expect(toolCallsFromText('<tool_call>{"name":"read","arguments":{"path":"a"}}', offered)?.calls).toHaveLength(1);
    expect(toolCallsFromText('```json\n{"name":"read","arguments":{"path":"a"}}\n```', offered)?.calls).toEqual([{ name: 'read', arguments: '{"path":"a"}' }]);
    expect(toolCallsFromText('[{"name":"read","arguments":{}},{"name":"grep","parameters":{"q":"1"}}]', offered)?.calls).toHaveLength(2);
    expect(toolCallsFromText('{"type":"function","function":{"name":"read","arguments":{"path":"b"}}}', offered)?.calls).toEqual([{ name: 'read', arguments: '{"path":"b"}' }]);
    // Still calls, so the agent can answer them with an error the model can act on: a tool that
    // was not offered, arguments that do not parse, a <tool_call> block that does not parse.
    expect(toolCallsFromText('{"name":"bash","arguments":{"command":"ls"}}', offered)?.calls).toEqual([{ name: 'bash', arguments: '{"command":"ls"}' }]);
    expect(toolCallsFromText('{"name":"read","arguments":"not json"}', offered)?.calls).toEqual([{ name: 'read', arguments: 'not json' }]);
    expect(toolCallsFromText('<tool_call>{"name":"read", </tool_call>', offered)?.calls).toEqual([{ name: 'unparsed_tool_call', arguments: '{"name":"read",' }]);
    // Stays text: unknown keys, no arguments on a bare object, prose around JSON, no tools.
    expect(toolCallsFromText('{"name":"read","arguments":{},"summary":"x"}', offered)).toBeNull();
    expect(toolCallsFromText('{"name":"read"}', offered)).toBeNull();
    expect(toolCallsFromText('Here: {"name":"read","arguments":{}}', offered)).toBeNull();
    expect(toolCallsFromText('{"name":"read","arguments":{}}', new Set())).toBeNull();
  });

  it('does not read a tool call out of text when the server also refused', () => {
    const res = fromOpenAIBody({ choices: [{ message: { content: '{"name":"read","arguments":{}}', refusal: 'no' }, finish_reason: 'stop' }] }, req(), 'p', 'm');
    expect(res).toMatchObject({ stopReason: 'refusal', toolCalls: [] });
  });
});

describe('anthropic mapping', () => {
  it('joins system messages, merges consecutive tool results, drops empty assistant turns', () => {
    const body = toAnthropicBody(
      req({
        messages: [
          { role: 'system', content: 'one' },
          { role: 'user', content: 'q' },
          { role: 'system', content: 'two' },
          { role: 'assistant', content: '', tool_calls: [{ id: 't1', name: 'read', arguments: 'not json' }] },
          { role: 'tool', tool_call_id: 't1', content: 'r1' },
          { role: 'assistant', content: '' },
          { role: 'user', content: 'again' },
        ],
      }),
      { model: 'c' },
    );
    expect(body).toEqual({
      model: 'c',
      max_tokens: 8192,
      system: 'one\n\ntwo',
      messages: [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'read', input: {} }] },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 't1', content: 'r1' },
            { type: 'text', text: 'again' },
          ],
        },
      ],
      tools: [{ name: 'read', description: 'r', input_schema: { type: 'object' } }],
    });
  });

  it('maps an error body and a missing content array to model_error', () => {
    expect(() => fromAnthropicBody({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }, req(), 'a', 'c')).toThrow('a: server returned an error: Overloaded');
    expect(() => fromAnthropicBody({ type: 'message' }, req(), 'a', 'c')).toThrow('a: response has no content array');
  });

  it('tool_use with end_turn still reports tool_calls; stop_sequence is stop', () => {
    const r = fromAnthropicBody({ content: [{ type: 'tool_use', id: 'u', name: 'read', input: { p: 1 } }], stop_reason: 'end_turn', usage: { input_tokens: 3, output_tokens: 4 } }, req(), 'a', 'c');
    expect(r).toMatchObject({ stopReason: 'tool_calls', usage: { inputTokens: 3, outputTokens: 4 }, model: 'c' });
    expect(fromAnthropicBody({ content: [{ type: 'text', text: 'x' }], stop_reason: 'stop_sequence' }, req(), 'a', 'c').stopReason).toBe('stop');
  });
});
