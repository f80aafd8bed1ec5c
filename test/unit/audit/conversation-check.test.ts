import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { checkAnswerProvenance, crossCheckConversation } from '../../../src/audit/cross-check.js';
import type { BrokerRecord, ToolCallLogRecord } from '../../../src/contracts/broker-record.js';
import { REJECTED_CALL_EVENT } from '../../../src/contracts/constants.js';

const h = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');

function logRec(ordinal: number, tool: string, args: string, result: string): ToolCallLogRecord {
  return {
    schema_version: 'fusion.fusion-tool-call.v1',
    ordinal,
    tool_name: tool,
    arguments_sha256: h(args),
    arguments_bytes: Buffer.byteLength(args),
    result_bytes: Buffer.byteLength(result),
    result_sha256: h(result),
    status: 'ok',
    duration_ms: 1,
  } as ToolCallLogRecord;
}

function model(ordinal: number, calls: Array<[string, string]>, sent: string[], content: string): BrokerRecord {
  return {
    kind: 'model',
    ordinal,
    at: new Date(0).toISOString(),
    durationMs: 1,
    requestBytes: 1,
    responseBytes: 1,
    toolCallsRequested: calls.length,
    ok: true,
    requested_calls: calls.map(([name, args]) => ({ name, arguments_sha256: h(args) })),
    sent_results: sent.map(h),
    content_sha256: h(content),
  };
}

const broker = [model(0, [['grep', '{"pattern":"x"}'], ['read', '{"path":"a"}']], [], ''), model(1, [], ['a:1:x', '1\tx'], 'final answer')];

describe('conversation cross-check (the log must be what crossed the broker)', () => {
  it('accepts the true log and answer', () => {
    const log = [logRec(0, 'grep', '{"pattern":"x"}', 'a:1:x'), logRec(1, 'read', '{"path":"a"}', '1\tx')];
    expect(() => crossCheckConversation(log, broker)).not.toThrow();
    expect(() => checkAnswerProvenance('final answer', broker)).not.toThrow();
  });

  it('refuses an invented call, a reordered log, a changed argument or a different result', () => {
    const invented = [logRec(0, 'grep', '{"pattern":"x"}', 'a:1:x'), logRec(1, 'read', '{"path":"a"}', '1\tx'), logRec(2, 'ls', '{}', '')];
    expect(() => crossCheckConversation(invented, broker)).toThrow(/model asked for 2/);
    const reordered = [logRec(0, 'read', '{"path":"a"}', '1\tx'), logRec(1, 'grep', '{"pattern":"x"}', 'a:1:x')];
    expect(() => crossCheckConversation(reordered, broker)).toThrow(/not the call the model asked for/);
    const changedArgs = [logRec(0, 'grep', '{"pattern":"y"}', 'a:1:x'), logRec(1, 'read', '{"path":"a"}', '1\tx')];
    expect(() => crossCheckConversation(changedArgs, broker)).toThrow(expect.objectContaining({ code: 'child_event_invalid' }));
    const otherResult = [logRec(0, 'grep', '{"pattern":"x"}', 'forged'), logRec(1, 'read', '{"path":"a"}', '1\tx')];
    expect(() => crossCheckConversation(otherResult, broker)).toThrow(/differs from the logged result/);
  });

  it('binds a rejected call to the call the model asked for by its arguments, whatever tool it named', () => {
    const asked = [model(0, [['bash', '{"command":"ls"}']], [], ''), model(1, [], ['no such tool'], 'final answer')];
    const rejected = { ...logRec(0, REJECTED_CALL_EVENT, '{"command":"ls"}', 'no such tool'), status: 'error' } as ToolCallLogRecord;
    expect(() => crossCheckConversation([rejected], asked)).not.toThrow();
    const otherArgs = { ...logRec(0, REJECTED_CALL_EVENT, '{"command":"id"}', 'no such tool'), status: 'error' } as ToolCallLogRecord;
    expect(() => crossCheckConversation([otherArgs], asked)).toThrow(/not the call the model asked for/);
    // Logging the invented tool under its own name still fails the allowlist (verify-log); here it is the wrong name.
    expect(() => crossCheckConversation([logRec(0, 'read', '{"command":"ls"}', 'no such tool')], asked)).toThrow(/not the call the model asked for/);
  });

  it('refuses an answer no model response contained', () => {
    expect(() => checkAnswerProvenance('an answer the child wrote itself', broker)).toThrow(/not the content of any model response/);
  });
});
