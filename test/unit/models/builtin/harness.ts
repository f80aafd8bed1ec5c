/**
 * In-process driver for the builtin engine: a tiny agent loop that executes the real sandbox
 * tools against a directory, a citation checker that reads the real files, and builders for the
 * evaluator and merger inputs, so tests exercise the engine end to end without a sandbox.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { ChatMessage, ToolSpec } from '../../../../src/contracts/broker-protocol.js';
import { buildCanonicalInput } from '../../../../src/contracts/canonical.js';
import type { CanonicalInput } from '../../../../src/contracts/canonical.js';
import { SCHEMA } from '../../../../src/contracts/constants.js';
import { normalizeToolInput } from '../../../../src/contracts/tool-input.js';
import type { ModelProvider } from '../../../../src/models/port.js';
import { parseCitedLines, parseCitedUrls } from '../../../../src/models/builtin/citations.js';
import { candidateSystemPrompt, candidateUserPrompt, evaluatorSystemPrompt, evaluatorUserPrompt, mergerSystemPrompt, mergerUserPrompt, messages } from '../../../../src/contracts/prompts.js';
import { runTool, TOOL_SPECS } from '../../../../sandbox/tools/index.js';

export const IPADDR_ROOT = path.resolve('node_modules/ipaddr.js');
export const FIXTURE_ROOT = path.resolve('test/fixtures/builtin-repo');

export function investigateInput(cwd: string, args: Record<string, unknown>): CanonicalInput {
  return buildCanonicalInput({ workflow: 'investigate', cwd, args: normalizeToolInput('investigate', args) });
}

export function researchInput(cwd: string, args: Record<string, unknown>): CanonicalInput {
  return buildCanonicalInput({ workflow: 'research', cwd, args: normalizeToolInput('research', args) });
}

export interface Run {
  answer: string;
  /** `name(args)` of every tool call, in order. */
  calls: string[];
  turns: number;
  messages: ChatMessage[];
}

export type Fetcher = (url: string) => { ok: true; text: string } | { ok: false; error: string };

/** Replaces a tool's result (e.g. to inject an error); undefined runs the real tool. */
export type Override = (name: string, args: Record<string, unknown>) => { ok: true; text: string } | { ok: false; error: string } | undefined;

/** Runs one candidate to its answer, executing tool calls with the real tools under `root`. */
export async function runCandidate(provider: ModelProvider, root: string, input: CanonicalInput, fetcher?: Fetcher, override?: Override): Promise<Run> {
  const toolNames = fetcher ? ['read', 'grep', 'find', 'ls', 'fusion_web_fetch'] : ['read', 'grep', 'find', 'ls'];
  const tools: ToolSpec[] = TOOL_SPECS.map((s) => ({ name: s.name, description: s.description, parameters: s.parameters as unknown as Record<string, unknown> }));
  if (fetcher) tools.push({ name: 'fusion_web_fetch', description: 'fetch a declared URL', parameters: { type: 'object' } });
  const msgs = messages(candidateSystemPrompt(input.workflow, toolNames), candidateUserPrompt(input));
  const calls: string[] = [];
  for (let turn = 1; turn <= 30; turn += 1) {
    const res = await provider.complete({ role: 'candidate', taskId: 'investigate-test', messages: msgs, tools });
    if (res.toolCalls.length === 0) return { answer: res.content, calls, turns: turn, messages: msgs };
    msgs.push({ role: 'assistant', content: res.content, tool_calls: res.toolCalls });
    for (const call of res.toolCalls) {
      calls.push(`${call.name}(${call.arguments})`);
      const args = JSON.parse(call.arguments) as Record<string, unknown>;
      const result = override?.(call.name, args) ?? (call.name === 'fusion_web_fetch' && fetcher ? fetcher(String(args['url'])) : await runTool(call.name, root, args));
      msgs.push({ role: 'tool', tool_call_id: call.id, name: call.name, content: result.ok ? result.text : result.error });
    }
  }
  throw new Error('candidate did not finish within 30 turns');
}

export interface PathCheck {
  citation: string;
  path: string;
  line: number;
  status: 'verified' | 'unquoted_verified_line' | 'missing_file' | 'missing_line' | 'quote_mismatch' | 'outside_repo';
  quoted?: string;
  actual?: string;
}

/** The mechanical check the workflow performs: does `path:line` exist and equal its quote? */
export function checkCitations(root: string, answer: string): PathCheck[] {
  return parseCitedLines(answer).map((c) => {
    const abs = path.resolve(root, c.path);
    if (!abs.startsWith(`${root}${path.sep}`)) return { citation: c.citation, path: c.path, line: c.line, status: 'outside_repo' };
    let lines: string[];
    try {
      lines = readFileSync(abs, 'utf8').split('\n');
    } catch {
      return { citation: c.citation, path: c.path, line: c.line, status: 'missing_file' };
    }
    const actual = lines[c.line - 1];
    if (actual === undefined || c.line < 1) return { citation: c.citation, path: c.path, line: c.line, status: 'missing_line' };
    if (c.quote === null) return { citation: c.citation, path: c.path, line: c.line, status: 'unquoted_verified_line', actual: actual.trim() };
    return actual.trim() === c.quote
      ? { citation: c.citation, path: c.path, line: c.line, status: 'verified', quoted: c.quote, actual: actual.trim() }
      : { citation: c.citation, path: c.path, line: c.line, status: 'quote_mismatch', quoted: c.quote, actual: actual.trim() };
  });
}

/** URL citations checked against the fetched page texts. */
export function checkUrls(answer: string, pages: Record<string, string>): { url: string; status: string; quoted: string }[] {
  return parseCitedUrls(answer)
    .filter((u) => u.quotes.length > 0)
    .map((u) => {
      const page = pages[u.url];
      const quoted = u.quotes.join('\n');
      if (page === undefined) return { url: u.url, status: 'not_fetched', quoted };
      const flat = (t: string): string => t.replace(/\s+/gu, ' ').trim();
      return { url: u.url, status: u.quotes.every((q) => flat(page).includes(flat(q))) ? 'verified' : 'quote_not_found', quoted };
    });
}

export function blindInput(input: CanonicalInput, answers: Record<'A' | 'B' | 'C', string>, checks: Record<'A' | 'B' | 'C', unknown[]>): Record<string, unknown> {
  return {
    schema_version: SCHEMA.blindCandidates,
    canonical_input: input,
    candidates: (['A', 'B', 'C'] as const).map((id) => ({ candidate_id: id, response: answers[id] })),
    citation_checks: checks,
  };
}

export async function runEvaluator(provider: ModelProvider, blind: unknown): Promise<string> {
  const res = await provider.complete({ role: 'evaluator', taskId: 't', messages: messages(evaluatorSystemPrompt(), evaluatorUserPrompt(blind)), tools: [] });
  return res.content;
}

export async function runMerger(provider: ModelProvider, input: CanonicalInput, answers: Record<'A' | 'B' | 'C', string>, evaluation: unknown, checks: Record<'A' | 'B' | 'C', unknown[]>): Promise<string> {
  const mergeInput = {
    schema_version: SCHEMA.mergeInput,
    canonical_input: input,
    candidates: (['A', 'B', 'C'] as const).map((id) => ({ candidate_id: id, response: answers[id] })),
    evaluation,
    citation_checks: checks,
  };
  const res = await provider.complete({ role: 'merger', taskId: 't', messages: messages(mergerSystemPrompt(), mergerUserPrompt(mergeInput)), tools: [] });
  return res.content;
}
