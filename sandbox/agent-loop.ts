/**
 * The agent loop shared by every child: candidates (inside the sandbox, with read/grep/find/ls
 * and, for research, fusion_web_fetch) and the evaluator, repair and merger stage workers (pooled
 * worker threads on the host, no tools). Node builtins and `src/contracts/constants.ts` only.
 *
 *   messages = request.messages
 *   repeat: one model turn through the broker (at most limits.max_model_requests)
 *     tool calls → run each one in order, logged in the sealed tool-call log, answered with one
 *                  `tool` message each; a name outside request.tools, or arguments that are not
 *                  a JSON object, are never executed: the call is logged as a rejected call
 *                  and answered with an error result, and the model goes on
 *     no calls   → the content is the final answer
 *   answer over its cap → a candidate gets exactly one no-tool compression turn; still over (or
 *                         any other role) → `output_cap`, the answer kept whole
 *   writes answer.md and result.json (ChildOutcome) with O_EXCL + fsync
 *
 * The loop never throws for anything the model or broker does: every failure becomes a
 * `failed` outcome with a code. It throws only when it cannot write its own output files.
 */
import { closeSync, constants, fsyncSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type {
  ChatMessage,
  ChildOutcome,
  ChildRequest,
  ModelTurnRequest,
  ToolCall,
  ToolSpec,
} from '../src/contracts/broker-protocol.js';
import { CHILD_LIMITS, REJECTED_CALL_EVENT, RESEARCH_FETCH_TOOL } from '../src/contracts/constants.js';
import { rejectionOf } from '../src/contracts/tool-rejection.js';

export { rejectionOf };
import type { FetchProvenance, ToolCallLog } from './audit-log.js';
import type { BrokerClient } from './broker-client.js';
import { TOOL_SPECS, isToolName, runTool } from './tools/index.js';
import type { ToolLimits } from './tools/index.js';
import { WEB_FETCH_TOOL_SPEC, runWebFetchTool } from './web-fetch-tool.js';
import { fsyncDir } from '../src/common/durable-fs.js';
import type { ErrorCode } from '../src/common/error-codes.js';

export const ANSWER_FILE = 'answer.md';
export const RESULT_FILE = 'result.json';

/** Codes written into `ChildOutcome.error` by the loop itself (registry codes of src/errors.ts). */
export const AGENT_ERROR_CODES = {
  limit: 'child_limit_exceeded',
  auditLog: 'child_event_invalid',
  failed: 'child_failed',
  cancelled: 'cancelled',
} as const satisfies Record<string, ErrorCode>;

export interface AgentLoopOptions {
  request: ChildRequest;
  broker: BrokerClient;
  /** The repository root the tools read (`/repo` in the sandbox). */
  repoRoot: string;
  /** Where answer.md and result.json are written (`/out` in the sandbox). Must exist. */
  outDir: string;
  /** The sealed tool-call log (candidates). The caller opens and seals it. */
  toolLog?: ToolCallLog;
  signal?: AbortSignal;
  /** Per-call limits of the repository tools (tests shrink them). */
  toolLimits?: Partial<ToolLimits>;
}

/** Stops the agent: a limit, a broken log, a cancel. Internal to the loop. */
class AgentStop extends Error {
  override readonly name = 'AgentStop';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

interface CallOutcome {
  status: 'ok' | 'error';
  text: string;
  fetch?: FetchProvenance;
  /** A wall-clock limit cut the repository tool's result short. */
  timerCut?: true;
}

export function modelRequestLimitMessage(limit: number): string {
  return `fusion child reached model request ${String(limit + 1)}, exceeding the ${String(limit)}-request limit`;
}

export function toolCallLimitMessage(limit: number): string {
  return `fusion child reached tool call ${String(limit + 1)}, exceeding the ${String(limit)}-call execution limit`;
}

/** docs/behaviour.md#b8: the cap is measured on the JSON string form of the text. */
export function answerCapBytes(answer: string): number {
  return Buffer.byteLength(JSON.stringify(answer), 'utf8');
}

/** Tool definitions offered to the model, in the order of `tools`; unknown names are skipped. */
export function toolSpecsFor(tools: readonly string[]): ToolSpec[] {
  const specs: ToolSpec[] = [];
  for (const name of tools) {
    if (name === RESEARCH_FETCH_TOOL) {
      specs.push(WEB_FETCH_TOOL_SPEC);
      continue;
    }
    const spec = TOOL_SPECS.find((s) => s.name === name);
    if (spec !== undefined) specs.push({ name: spec.name, description: spec.description, parameters: { ...spec.parameters } });
  }
  return specs;
}

function errorCode(err: unknown, fallback: string): string {
  if (typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'string') {
    return (err as { code: string }).code;
  }
  return fallback;
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Writes a new file (never replaces one), fsynced; 0600 like the rest of the attempt's files. */
function writeExclusive(path: string, text: string): void {
  const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    const bytes = Buffer.from(text, 'utf8');
    let offset = 0;
    while (offset < bytes.length) offset += writeSync(fd, bytes, offset, bytes.length - offset);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A candidate-facing url argument, for the rejected-fetch hash when the call never ran. */
function attemptedUrlOf(rawArguments: string): string {
  try {
    const parsed: unknown = JSON.parse(rawArguments);
    if (typeof parsed === 'object' && parsed !== null && typeof (parsed as { url?: unknown }).url === 'string') {
      return (parsed as { url: string }).url;
    }
  } catch {
    // not JSON: nothing was attempted
  }
  return '';
}

export async function runAgentLoop(options: AgentLoopOptions): Promise<ChildOutcome> {
  const { request, broker, toolLog, signal } = options;
  const limits = request.limits;
  const specs = toolSpecsFor(request.tools);
  const messages: ChatMessage[] = [...request.messages];

  let modelRequests = 0;
  let toolCalls = 0;
  let toolResultBytes = 0;
  let compressed = false;

  function checkCancelled(): void {
    if (signal?.aborted === true) throw new AgentStop(AGENT_ERROR_CODES.cancelled, 'the agent was cancelled');
  }

  async function modelTurn(turn: ModelTurnRequest): Promise<{ content: string; toolCalls: ToolCall[] }> {
    checkCancelled();
    if (modelRequests >= limits.max_model_requests) {
      throw new AgentStop(AGENT_ERROR_CODES.limit, modelRequestLimitMessage(limits.max_model_requests));
    }
    modelRequests += 1;
    const response = await broker.modelTurn(turn, signal);
    return { content: response.message.content, toolCalls: response.message.tool_calls };
  }

  async function execute(call: ToolCall): Promise<CallOutcome> {
    const isFetch = call.name === RESEARCH_FETCH_TOOL;
    // Only calls that passed rejectionOf get here: a known tool with JSON-object arguments.
    const args: unknown = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
    if (isFetch) {
      const fetched = await runWebFetchTool(args, {
        declaredUrls: request.declared_urls,
        broker,
        ...(signal === undefined ? {} : { signal }),
      });
      return { status: fetched.status, text: fetched.text, fetch: fetched.provenance };
    }
    if (!isToolName(call.name)) return { status: 'error', text: `tool ${JSON.stringify(call.name.slice(0, 100))} has no implementation in this child` };
    const result = await runTool(call.name, options.repoRoot, args, options.toolLimits);
    if (!result.ok) return { status: 'error', text: result.error };
    return result.timerCut === true ? { status: 'ok', text: result.text, timerCut: true } : { status: 'ok', text: result.text };
  }

  async function runCall(call: ToolCall): Promise<string> {
    checkCancelled();
    const number = toolCalls + 1;
    // The log's own ids: provider ids are not guaranteed unique across turns.
    const logId = `call-${String(number)}`;
    const limit = limits.max_tool_calls;
    // With a log, the writer refuses call 601 itself (its message, its broken seal).
    if (number > limit && (toolLog === undefined || limit < CHILD_LIMITS.maxToolCalls)) {
      throw new AgentStop(AGENT_ERROR_CODES.limit, toolCallLimitMessage(limit));
    }
    const rejection = rejectionOf(call, request.tools);
    if (toolLog !== undefined) {
      const begun = toolLog.begin(logId, rejection === undefined ? call.name : REJECTED_CALL_EVENT);
      if (!begun.ok) {
        const code = begun.message === toolCallLimitMessage(CHILD_LIMITS.maxToolCalls) ? AGENT_ERROR_CODES.limit : AGENT_ERROR_CODES.auditLog;
        throw new AgentStop(code, begun.message);
      }
    }
    toolCalls = number;
    let outcome: CallOutcome;
    try {
      outcome = rejection === undefined ? await execute(call) : { status: 'error', text: rejection };
    } catch (err) {
      // Tools never throw by contract; this keeps the log matched if one does anyway.
      const text = `${call.name} failed: ${errorMessage(err)}`;
      outcome = call.name === RESEARCH_FETCH_TOOL && rejection === undefined ? { status: 'error', text, fetch: { outcome: 'rejected', attemptedUrl: attemptedUrlOf(call.arguments) } } : { status: 'error', text };
    }
    if (toolLog !== undefined) {
      const finished = toolLog.finish(logId, {
        arguments: call.arguments,
        result: outcome.text,
        status: outcome.status,
        ...(outcome.fetch === undefined ? {} : { fetch: outcome.fetch }),
        ...(outcome.timerCut === true ? { timerCut: true as const } : {}),
      });
      if (!finished.ok) {
        const code = finished.message.includes('aggregate') ? AGENT_ERROR_CODES.limit : AGENT_ERROR_CODES.auditLog;
        throw new AgentStop(code, finished.message);
      }
    }
    toolResultBytes += Buffer.byteLength(outcome.text, 'utf8');
    if (toolResultBytes > limits.max_tool_result_bytes) {
      throw new AgentStop(AGENT_ERROR_CODES.limit, `fusion child tool results exceed the aggregate ${String(limits.max_tool_result_bytes)}-byte limit`);
    }
    return outcome.text;
  }

  /** Runs turns until the model answers without tool calls; returns that answer. */
  async function converse(): Promise<string> {
    for (;;) {
      const turn = await modelTurn({ messages, tools: specs, purpose: 'step' });
      if (turn.toolCalls.length === 0) return turn.content;
      messages.push({ role: 'assistant', content: turn.content, tool_calls: turn.toolCalls });
      for (const call of turn.toolCalls) {
        const text = await runCall(call);
        messages.push({ role: 'tool', content: text, tool_call_id: call.id, name: call.name });
      }
    }
  }

  let answer = '';
  let status: ChildOutcome['status'] = 'answered';
  let error: ChildOutcome['error'];
  try {
    answer = await converse();
    if (answer.trim() === '') {
      status = 'failed';
      error = { code: AGENT_ERROR_CODES.failed, message: 'the model returned an empty final answer' };
    } else if (answerCapBytes(answer) > limits.output_cap_bytes) {
      if (request.role === 'candidate' && modelRequests < limits.max_model_requests) {
        // docs/behaviour.md#b8: exactly one no-tool compression turn, then the cap is final.
        compressed = true;
        const shorter = await modelTurn({
          messages: [...messages, { role: 'assistant', content: answer }, { role: 'user', content: request.compression_prompt }],
          tools: [],
          purpose: 'compress',
        });
        if (shorter.content.trim() !== '') answer = shorter.content;
      }
      if (answerCapBytes(answer) > limits.output_cap_bytes) {
        status = 'output_cap';
        error = {
          code: 'child_output_cap',
          message: `${request.role} answer is ${String(answerCapBytes(answer))} bytes, over the ${String(limits.output_cap_bytes)}-byte cap`,
        };
      }
    }
  } catch (err) {
    status = 'failed';
    const code = err instanceof AgentStop ? err.code : signal?.aborted === true ? AGENT_ERROR_CODES.cancelled : errorCode(err, AGENT_ERROR_CODES.failed);
    error = { code, message: errorMessage(err) };
  }

  const hasAnswer = answer.trim() !== '';
  const outcome: ChildOutcome = {
    status,
    // The size of answer.md (0 when none is written).
    answer_bytes: hasAnswer ? Buffer.byteLength(answer, 'utf8') : 0,
    model_requests: modelRequests,
    tool_calls: toolCalls,
    compressed,
    ...(error === undefined ? {} : { error }),
  };
  // The answer is kept whole whenever there is one (over the cap too): never truncated.
  if (hasAnswer) writeExclusive(join(options.outDir, ANSWER_FILE), answer);
  writeExclusive(join(options.outDir, RESULT_FILE), `${JSON.stringify(outcome)}\n`);
  fsyncDir(options.outDir);
  return outcome;
}

/** Whether the agent settled (reached an answer); the tool-call log is sealed `complete` only then. */
export function agentSettled(outcome: ChildOutcome): boolean {
  return outcome.status === 'answered' || outcome.status === 'output_cap';
}
