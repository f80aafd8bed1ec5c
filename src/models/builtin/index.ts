/**
 * The builtin engine: a deterministic, offline `ModelProvider` that plays every role without a
 * language model, doing checkable work (docs/architecture.md#builtin-engine).
 *
 * Stateless: each `complete` call recomputes its next step from the messages alone (the data
 * block of the first user message, then the tool calls and results so far), so a retried or
 * replayed turn gives the same output byte for byte, and no state survives between calls.
 */
import type { ChatMessage, ToolCall } from '../../contracts/broker-protocol.js';
import type { ModelProvider, ModelRequest, ModelResponse } from '../port.js';
import { compressAnswer } from './answer.js';
import { contentSearch } from './candidate-content.js';
import { definitionSearch } from './candidate-definition.js';
import { pathSearch } from './candidate-path.js';
import { evaluate, evaluatorInput } from './evaluator.js';
import { merge } from './merger.js';
import { FETCH_TOOL, researchSearch } from './research-candidate.js';
import type { ResearchContext } from './research-candidate.js';
import type { SearchContext, Strategy } from './strategy.js';
import { nextStep } from './strategy.js';
import { extractTerms, requestFields } from './terms.js';
import { asArray, asRecord, asString, batchesOf, inputOf, isCompressionTurn, lastAnswer, toToolCalls, toolCallCount } from './transcript.js';

export type BuiltinStrategy = 'content-search' | 'path-search' | 'definition-search';

export const BUILTIN_STRATEGIES: readonly BuiltinStrategy[] = ['content-search', 'path-search', 'definition-search'];

const STRATEGIES: Readonly<Record<BuiltinStrategy, Strategy>> = {
  'content-search': contentSearch,
  'path-search': pathSearch,
  'definition-search': definitionSearch,
};

/** Token counts are estimates (≈ 4 bytes per token), for usage accounting only. */
function estimateTokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text) / 4);
}

function messageText(m: ChatMessage): string {
  return m.content + (m.tool_calls ?? []).map((c) => c.name + c.arguments).join('');
}

function response(model: string, req: ModelRequest, content: string, toolCalls: ToolCall[] = []): ModelResponse {
  return {
    content,
    toolCalls,
    stopReason: toolCalls.length > 0 ? 'tool_calls' : 'stop',
    usage: {
      inputTokens: estimateTokens(req.messages.map(messageText).join('') + JSON.stringify(req.tools)),
      outputTokens: estimateTokens(content + toolCalls.map((c) => c.name + c.arguments).join('')),
    },
    model,
  };
}

function candidateTurn(strategy: Strategy, req: ModelRequest): { content: string; toolCalls: ToolCall[] } {
  if (isCompressionTurn(req.messages)) return { content: compressAnswer(lastAnswer(req.messages)), toolCalls: [] };
  const input = asRecord(inputOf(req.messages));
  const fields = requestFields(asString(asRecord(input['request'])['text']));
  // A turn without tools must answer; the tools already used say which phases ran.
  const mustAnswer = req.tools.length === 0;
  const used = req.messages.flatMap((m) => (m.tool_calls ?? []).map((c) => c.name));
  const available = new Set(mustAnswer ? used : req.tools.map((t) => t.name));
  const declared = asArray(asRecord(input['context'])['declared_sources'])
    .map((s) => asString(asRecord(s)['canonical_url']) || asString(asRecord(s)['url']))
    .filter((u) => u !== '');
  const research = declared.length > 0 && (available.has(FETCH_TOOL) || (mustAnswer && asString(input['workflow']) === 'research'));
  const ctx: SearchContext | ResearchContext = research
    ? { fields, terms: extractTerms(fields), available, urls: declared }
    : { fields, terms: extractTerms(fields), available };
  const step = nextStep(research ? researchSearch : strategy, ctx, batchesOf(req.messages), mustAnswer);
  if (step.kind === 'answer') return { content: step.text, toolCalls: [] };
  return { content: '', toolCalls: toToolCalls(step.calls, toolCallCount(req.messages)) };
}

export function createBuiltinProvider(strategy: BuiltinStrategy): ModelProvider {
  const plan = STRATEGIES[strategy];
  if (plan === undefined) throw new Error(`unknown builtin strategy: ${String(strategy)}`);
  const id = `builtin:${strategy}`;
  return {
    id,
    engine: 'builtin',
    complete(req: ModelRequest): Promise<ModelResponse> {
      // Synchronous work behind a promise: errors surface as rejections, like any adapter's.
      return new Promise((resolve) => {
        if (req.signal?.aborted) throw req.signal.reason ?? new Error('aborted');
        switch (req.role) {
          case 'candidate': {
            const turn = candidateTurn(plan, req);
            resolve(response(id, req, turn.content, turn.toolCalls));
            return;
          }
          case 'evaluator':
          case 'repair':
            resolve(response(id, req, evaluate(evaluatorInput(inputOf(req.messages)))));
            return;
          case 'merger':
            resolve(response(id, req, merge(inputOf(req.messages))));
            return;
          default:
            throw new Error(`builtin engine: unsupported role ${String(req.role)}`);
        }
      });
    },
  };
}
