import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ANSWER_FILE, RESULT_FILE, answerCapBytes, modelRequestLimitMessage, runAgentLoop, toolSpecsFor } from '../../../sandbox/agent-loop.js';
import { TOOL_CALL_LIMIT_MESSAGE, openToolCallLog, type ToolCallLog } from '../../../sandbox/audit-log.js';
import { createBrokerClient } from '../../../sandbox/broker-client.js';
import type { ChildOutcome, ChildRequest } from '../../../src/contracts/broker-protocol.js';
import { CANDIDATE_TOOLS, REJECTED_CALL_EVENT } from '../../../src/contracts/constants.js';
import { verifyToolCallLog } from '../../../src/audit/verify-log.js';
import {
  answerTurn,
  call,
  childRequest,
  startFakeBroker,
  toolTurn,
  type FakeBroker,
  type ScriptedModel,
} from '../../integration/broker/fixtures.js';
import { agentWorkspace } from './workspace.js';
import type { ToolLimits } from '../../../sandbox/tools/index.js';

let root: string;
let cleanup: () => void;
let repo: string;
let out: string;
let broker: FakeBroker | undefined;

beforeEach(() => {
  ({ root, repo, out, cleanup } = agentWorkspace('fusion-agent-'));
});

afterEach(async () => {
  await broker?.close();
  broker = undefined;
  cleanup();
});

async function run(request: ChildRequest, model: ScriptedModel, withLog = true, toolLimits?: Partial<ToolLimits>): Promise<{ outcome: ChildOutcome; log: ToolCallLog | undefined }> {
  broker = await startFakeBroker(join(root, 'b.sock'), model);
  const log = withLog ? openToolCallLog({ dir: out, slot: 1, attempt: 1 }) : undefined;
  const outcome = await runAgentLoop({
    request,
    broker: createBrokerClient({ socketPath: broker.socketPath }),
    repoRoot: repo,
    outDir: out,
    ...(log === undefined ? {} : { toolLog: log }),
    ...(toolLimits === undefined ? {} : { toolLimits }),
  });
  return { outcome, log };
}

function readResult(): ChildOutcome {
  return JSON.parse(readFileSync(join(out, RESULT_FILE), 'utf8')) as ChildOutcome;
}

describe('runAgentLoop', () => {
  it('runs a tool-using conversation and writes answer.md, result.json and a log the verifier accepts', async () => {
    const script = [
      toolTurn(call('grep', { pattern: 'function greet' })),
      toolTurn(call('read', { path: 'src/greet.ts' }), call('ls', {})),
      answerTurn('`greet` is defined at `src/greet.ts:1`.'),
    ];
    const { outcome, log } = await run(childRequest(), (_req, i) => script[i] ?? answerTurn('unexpected'));

    expect(outcome).toEqual({ status: 'answered', answer_bytes: 39, model_requests: 3, tool_calls: 3, compressed: false });
    expect(readFileSync(join(out, ANSWER_FILE), 'utf8')).toBe('`greet` is defined at `src/greet.ts:1`.');
    expect(readResult()).toEqual(outcome);

    const requests = broker?.modelRequests ?? [];
    expect(requests.map((r) => r.purpose)).toEqual(['step', 'step', 'step']);
    expect(requests[0]?.tools.map((t) => t.name)).toEqual([...CANDIDATE_TOOLS]);
    // The second turn sees the assistant's call and the grep result as a tool message.
    const second = requests[1]?.messages ?? [];
    expect(second.at(-2)?.role).toBe('assistant');
    expect(second.at(-1)).toMatchObject({ role: 'tool', name: 'grep' });
    expect(second.at(-1)?.content).toContain('src/greet.ts:1:');
    const third = requests[2]?.messages ?? [];
    expect(third.filter((m) => m.role === 'tool').map((m) => m.name)).toEqual(['grep', 'read', 'ls']);
    expect(third.at(-2)?.content).toContain('1\texport function greet');
    expect(third.at(-1)?.content).toContain('src/');

    expect(log?.seal(true).status).toBe('complete');
    const verified = await verifyToolCallLog({ dir: out, slot: 1, attempt: 1, allowedTools: CANDIDATE_TOOLS, declaredUrls: [], expectCalls: true });
    expect(verified.records.map((r) => [r.tool_name, r.status])).toEqual([
      ['grep', 'ok'],
      ['read', 'ok'],
      ['ls', 'ok'],
    ]);
  });

  it('logs a grep its regex watchdog cut as timer_cut, and a whole one without it', async () => {
    writeFileSync(join(repo, 'evil.txt'), `${'a'.repeat(40)}b\n`);
    const script = [toolTurn(call('grep', { pattern: '^(a+)+$', path: 'evil.txt' })), toolTurn(call('grep', { pattern: 'function greet', path: 'src/greet.ts' })), answerTurn('done')];
    const { log } = await run(childRequest(), (_req, i) => script[i] ?? answerTurn('unexpected'), true, { regexTimeoutMs: 200 });
    expect(log?.seal(true).status).toBe('complete');
    const verified = await verifyToolCallLog({ dir: out, slot: 1, attempt: 1, allowedTools: CANDIDATE_TOOLS, declaredUrls: [] });
    expect(verified.records.map((r) => r.timer_cut)).toEqual([true, undefined]);
  });

  it('reports a tool error as a tool result and keeps going; malformed arguments are a rejected call', async () => {
    const script = [toolTurn(call('read', { path: 'missing.ts' })), toolTurn(call('read', '{not json')), toolTurn(call('grep', '["x"]')), answerTurn('done')];
    const { outcome, log } = await run(childRequest(), (_req, i) => script[i] ?? answerTurn('unexpected'));
    expect(outcome.status).toBe('answered');
    expect(broker?.modelRequests[2]?.messages.at(-1)?.content).toBe('read was not run: its arguments must be a JSON object, and they are not valid JSON. Call it again with a JSON object.');
    expect(broker?.modelRequests[3]?.messages.at(-1)?.content).toBe('grep was not run: its arguments must be a JSON object. Call it again with a JSON object.');
    expect(log?.seal(true).status).toBe('complete');
    const verified = await verifyToolCallLog({ dir: out, slot: 1, attempt: 1, allowedTools: CANDIDATE_TOOLS, declaredUrls: [] });
    expect(verified.records.map((r) => [r.tool_name, r.status])).toEqual([
      ['read', 'error'],
      [REJECTED_CALL_EVENT, 'error'],
      [REJECTED_CALL_EVENT, 'error'],
    ]);
  });

  it('never executes an invented tool: it answers with an error, logs a rejected call the verifier accepts, and goes on', async () => {
    const script = [toolTurn(call('bash', { command: 'cat /etc/passwd' })), toolTurn(call('read', { path: 'src/greet.ts' })), answerTurn('`src/greet.ts:1`')];
    const { outcome, log } = await run(childRequest({ tools: ['read'] }), (_req, i) => script[i] ?? answerTurn('unexpected'));
    expect(outcome).toMatchObject({ status: 'answered', tool_calls: 2 });
    expect(broker?.modelRequests[0]?.tools.map((t) => t.name)).toEqual(['read']);
    const toolMessage = broker?.modelRequests[1]?.messages.at(-1);
    expect(toolMessage).toMatchObject({ role: 'tool', name: 'bash' });
    expect(toolMessage?.content).toBe('tool "bash" does not exist here and was not run; available tools: read. Call one of those, or write your final answer.');
    log?.seal(true);
    const lines = readFileSync(log?.path ?? '', 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => [l['tool_name'], l['status']])).toEqual([
      [REJECTED_CALL_EVENT, 'error'],
      ['read', 'ok'],
    ]);
    const verified = await verifyToolCallLog({ dir: out, slot: 1, attempt: 1, allowedTools: ['read'], declaredUrls: [] });
    expect(verified.records).toHaveLength(2);
  });

  it('gives an oversized candidate answer exactly one no-tool compression turn', async () => {
    const long = 'x'.repeat(500);
    const script = [toolTurn(call('ls', {})), answerTurn(long), answerTurn('short answer')];
    const request = childRequest({}, { output_cap_bytes: 200 });
    const { outcome } = await run(request, (_req, i) => script[i] ?? answerTurn('unexpected'));
    expect(outcome).toEqual({ status: 'answered', answer_bytes: 12, model_requests: 3, tool_calls: 1, compressed: true });
    expect(readFileSync(join(out, ANSWER_FILE), 'utf8')).toBe('short answer');
    const compress = broker?.modelRequests[2];
    expect(compress?.purpose).toBe('compress');
    expect(compress?.tools).toEqual([]);
    expect(compress?.messages.at(-2)).toEqual({ role: 'assistant', content: long });
    expect(compress?.messages.at(-1)).toEqual({ role: 'user', content: request.compression_prompt });
  });

  it('ends with output_cap when the compressed answer is still over, keeping it whole', async () => {
    const first = 'y'.repeat(500);
    const second = 'z'.repeat(300);
    const { outcome } = await run(childRequest({}, { output_cap_bytes: 200 }), (_req, i) => answerTurn(i === 0 ? first : second));
    expect(outcome.status).toBe('output_cap');
    expect(outcome.compressed).toBe(true);
    expect(outcome.model_requests).toBe(2);
    expect(outcome.error?.code).toBe('child_output_cap');
    expect(broker?.modelRequests).toHaveLength(2);
    expect(readFileSync(join(out, ANSWER_FILE), 'utf8')).toBe(second);
    expect(answerCapBytes(second)).toBe(302);
    expect(readResult()).toEqual(outcome);
  });

  it('does not compress for other roles: an oversized evaluator answer is output_cap at once', async () => {
    const big = 'e'.repeat(1000);
    const { outcome } = await run(childRequest({ role: 'evaluator' }, { output_cap_bytes: 500 }), () => answerTurn(big), false);
    expect(outcome).toMatchObject({ status: 'output_cap', compressed: false, model_requests: 1, answer_bytes: 1000 });
    expect(readFileSync(join(out, ANSWER_FILE), 'utf8')).toBe(big);
    expect(broker?.modelRequests[0]?.tools).toEqual([]);
  });

  it('stops cleanly at the model request limit', async () => {
    const { outcome, log } = await run(childRequest({}, { max_model_requests: 3 }), () => toolTurn(call('ls', {})));
    expect(outcome).toMatchObject({ status: 'failed', model_requests: 3, tool_calls: 3 });
    expect(outcome.error).toEqual({ code: 'child_limit_exceeded', message: modelRequestLimitMessage(3) });
    expect(broker?.modelRequests).toHaveLength(3);
    expect(existsSync(join(out, ANSWER_FILE))).toBe(false);
    expect(readResult()).toEqual(outcome);
    // Every started call finished: the log itself is consistent.
    expect(log?.brokenReason).toBeUndefined();
  });

  it('refuses tool call 601 with the log writer message and stops the agent', async () => {
    const calls = Array.from({ length: 601 }, () => call('ls', {}));
    const { outcome, log } = await run(childRequest(), (_req, i) => (i === 0 ? toolTurn(...calls) : answerTurn('never')));
    expect(outcome.status).toBe('failed');
    expect(outcome.error).toEqual({ code: 'child_limit_exceeded', message: TOOL_CALL_LIMIT_MESSAGE });
    expect(outcome.tool_calls).toBe(600);
    expect(broker?.modelRequests).toHaveLength(1);
    expect(log?.recordCount).toBe(600);
    expect(log?.seal(false).status).toBe('failed');
  });

  it('fails on an empty final answer', async () => {
    const { outcome } = await run(childRequest(), () => answerTurn('  \n'));
    expect(outcome).toMatchObject({ status: 'failed', answer_bytes: 0, error: { code: 'child_failed' } });
    expect(existsSync(join(out, ANSWER_FILE))).toBe(false);
  });

  it('turns a broker error envelope into a failed outcome with its code', async () => {
    const { outcome } = await run(childRequest(), () => ({ status: 502, error: { code: 'model_error', message: 'upstream exploded' } }));
    expect(outcome).toMatchObject({ status: 'failed', model_requests: 1, error: { code: 'model_error', message: 'upstream exploded' } });
  });

  it('never replaces an existing answer.md', async () => {
    writeFileSync(join(out, ANSWER_FILE), 'planted');
    await expect(run(childRequest(), () => answerTurn('real'))).rejects.toMatchObject({ code: 'EEXIST' });
    expect(readFileSync(join(out, ANSWER_FILE), 'utf8')).toBe('planted');
  });

  it('offers the fetch tool spec only when listed', () => {
    expect(toolSpecsFor(['read', 'fusion_web_fetch', 'bash']).map((s) => s.name)).toEqual(['read', 'fusion_web_fetch']);
    expect(toolSpecsFor([])).toEqual([]);
  });
});
