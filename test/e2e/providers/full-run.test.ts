/**
 * Remote providers end to end: full runs against fake model servers that speak the real OpenAI and
 * Anthropic wire formats (loopback only), three different candidate models, a blind evaluator
 * that never learns which model wrote what, and a sentinel key that appears nowhere it must not.
 */
import { mkdtempSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { buildConfig, startDaemon, type Daemon } from '../../../src/main.js';
import { FusionClient } from '../../../src/client/index.js';
import { startFakeOpenAI, openaiCompletion, type FakeOpenAI } from '../../integration/models/fake-openai.js';
import { startFakeAnthropic, anthropicMessage, type FakeAnthropic } from '../../integration/models/fake-anthropic.js';
import type { RecordedRequest } from '../../integration/models/fake-server.js';

const SENTINEL = 'sk-SENTINEL-e2e-7c1d2a9b4f6e8d0c3b5a7f9e1d3c5b7a';
const REPO = join(__dirname, '..', '..', 'fixtures', 'builtin-repo');
const ARGS = { objective: 'Find where numeric literals are tokenized', background: ['A small calculator with a lexer and a parser'], deliverable: 'The file and function that tokenize numbers' };

type Msg = { role: string; content: unknown };

/** Text of every message, whatever the wire format (OpenAI strings, Anthropic blocks). */
function allText(body: any): string {
  const parts: string[] = [];
  if (typeof body.system === 'string') parts.push(body.system);
  for (const m of (body.messages ?? []) as Msg[]) {
    if (typeof m.content === 'string') parts.push(m.content);
    else if (Array.isArray(m.content)) for (const b of m.content as any[]) parts.push(typeof b.text === 'string' ? b.text : typeof b.content === 'string' ? b.content : JSON.stringify(b.content ?? b.input ?? ''));
  }
  return parts.join('\n');
}

function role(body: any): 'candidate' | 'evaluator' | 'merger' {
  const text = allText(body);
  if (text.includes('You are a blind evaluator')) return 'evaluator';
  if (text.includes('You write the final answer')) return 'merger';
  return 'candidate';
}

/** The last grep hit a candidate saw, as `path:line:text`. */
function firstHit(body: any): { path: string; line: string; text: string } | undefined {
  const m = /^([\w./-]+\.js):(\d+):(.*)$/m.exec(allText(body));
  return m ? { path: m[1]!, line: m[2]!, text: m[3]!.trim() } : undefined;
}

function hasToolResult(body: any): boolean {
  return ((body.messages ?? []) as any[]).some((m) => m.role === 'tool' || (Array.isArray(m.content) && m.content.some((b: any) => b.type === 'tool_result')));
}

const EVALUATION = JSON.stringify({
  schema_version: 'fusion.fusion-evaluation.v1',
  candidate_assessments: ['A', 'B', 'C'].map((id) => ({ candidate_id: id, summary: `Answer ${id} cites the tokenizer.`, strengths: ['cites a verified line'], limitations: [], useful_contributions: ['the tokenizer location'], risks: [] })),
  agreements: ['All answers point at the tokenizer.'],
  conflicts: [],
  synthesis_plan: { must_include: [{ candidate_id: 'A', contribution: 'the tokenizer location' }], must_resolve: [], must_avoid: [] },
});

/** One scripted behaviour per role, shared by both wire formats. */
function reply(body: any): { text?: string; tool?: { name: string; input: Record<string, unknown> } } {
  switch (role(body)) {
    case 'evaluator':
      return { text: EVALUATION };
    case 'merger':
      return { text: 'Numbers are tokenized in `src/lexer/tokenizer.js`, which scans digits into NUMBER tokens.' };
    default: {
      if (!hasToolResult(body)) return { tool: { name: 'grep', input: { pattern: 'number', ignore_case: true } } };
      const hit = firstHit(body);
      return { text: hit ? `## Findings\n\n- \`${hit.path}:${hit.line}\`\n  > \`${hit.text}\`\n` : 'No match found.' };
    }
  }
}

function collectFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = statSync(p);
    if (st.isDirectory()) out.push(...collectFiles(p));
    else if (st.isFile()) out.push(p);
  }
  return out;
}

async function runFull(specs: { candidates: string[]; evaluator: string; merger: string }, env: Record<string, string>) {
  const home = mkdtempSync(join(tmpdir(), 'fusion-providers-'));
  const logs: string[] = [];
  const log = pino({ level: 'trace' }, new Writable({ write: (c, _e, cb) => (logs.push(String(c)), cb()) }));
  const config = buildConfig({ home, socketPath: join(home, 'fusion.sock'), sandbox: 'bwrap', candidateModels: specs.candidates, evaluatorModel: specs.evaluator, mergerModel: specs.merger });
  const daemon: Daemon = await startDaemon(config, { log, env });
  const client = new FusionClient(daemon.socketPath);
  try {
    const receipt = (await client.call('POST', '/v1/tasks/investigate', { arguments: ARGS, repo: REPO })) as any;
    const events: any[] = [];
    for await (const e of client.events(receipt.taskId)) events.push(e);
    const status = (await client.call('GET', `/v1/tasks/${receipt.taskId}`)) as any;
    const result = (await client.call('GET', `/v1/tasks/${receipt.taskId}/result`)) as any;
    return { home, logs, events, status, result, taskId: receipt.taskId as string };
  } finally {
    await daemon.close();
  }
}

function assertNoSentinel(run: Awaited<ReturnType<typeof runFull>>): void {
  for (const file of collectFiles(run.home)) {
    expect(readFileSync(file).includes(SENTINEL), `sentinel key found in ${file}`).toBe(false);
  }
  expect(run.logs.join('').includes(SENTINEL)).toBe(false);
  expect(JSON.stringify(run.events).includes(SENTINEL)).toBe(false);
  expect(JSON.stringify(run.result).includes(SENTINEL)).toBe(false);
}

function assertBlindEvaluator(requests: RecordedRequest[], modelNames: string[]): void {
  const evaluatorBodies = requests.map((r) => r.body as any).filter((b) => b && role(b) === 'evaluator');
  expect(evaluatorBodies.length).toBe(1);
  const text = allText(evaluatorBodies[0]);
  for (const name of modelNames) expect(text.includes(name), `evaluator saw model name ${name}`).toBe(false);
  expect(text).not.toMatch(/"slot"|candidate-[123]|openai|anthropic/);
  expect(text).toContain('"candidate_id":"A"');
}

describe('full runs against fake provider wire formats', () => {
  const fakes: Array<FakeOpenAI | FakeAnthropic> = [];
  afterAll(async () => {
    await Promise.all(fakes.map((f) => f.close()));
  });

  it('OpenAI Chat Completions: three different candidate models, evaluator, merger', async () => {
    const fake = await startFakeOpenAI({ apiKey: SENTINEL });
    fakes.push(fake);
    fake.setFallback((req) => {
      const r = reply(req.body);
      return r.tool
        ? openaiCompletion({ toolCalls: [{ id: `call_${Math.random().toString(16).slice(2, 8)}`, name: r.tool.name, arguments: JSON.stringify(r.tool.input) }], usage: { prompt_tokens: 100, completion_tokens: 10 } })
        : openaiCompletion({ content: r.text!, usage: { prompt_tokens: 200, completion_tokens: 50 } });
    });
    const models = ['cand-alpha', 'cand-beta', 'cand-gamma'];
    const run = await runFull(
      { candidates: models.map((m) => `openai:${m}@${fake.baseUrl}`), evaluator: `openai:judge-delta@${fake.baseUrl}`, merger: `openai:writer-epsilon@${fake.baseUrl}` },
      { OPENAI_API_KEY: SENTINEL },
    );
    expect(run.status.state, JSON.stringify(run.status.error)).toBe('completed');
    expect(run.result.answer.text).toContain('src/lexer/tokenizer.js');
    expect(run.result.engine).toBe('openai');
    // Every candidate model was really used, each with the identical prompt.
    const bodies = fake.bodies() as any[];
    const used = new Set(bodies.map((b) => b.model));
    for (const m of [...models, 'judge-delta', 'writer-epsilon']) expect(used.has(m)).toBe(true);
    const firstTurns = bodies.filter((b) => models.includes(b.model) && !hasToolResult(b)).map((b) => JSON.stringify(b.messages));
    expect(new Set(firstTurns).size).toBe(1);
    for (const r of fake.requests) expect(r.headers.authorization).toBe(`Bearer ${SENTINEL}`);
    assertBlindEvaluator(fake.requests, [...models, 'judge-delta', 'writer-epsilon']);
    assertNoSentinel(run);
    // Usage per stage and model, attached on the first retrieval only.
    expect(run.result.usage.totals.requests).toBe(3 * 2 + 2);
    expect(run.status.usage.entries.map((e: any) => e.model)).toContain('openai:cand-beta');
  });

  it('Anthropic Messages: tool_use / tool_result round trip through the sandboxes', async () => {
    const fake = await startFakeAnthropic({ apiKey: SENTINEL });
    fakes.push(fake);
    fake.setFallback((req) => {
      const r = reply(req.body);
      return r.tool
        ? anthropicMessage({ toolUses: [{ id: `toolu_${Math.random().toString(16).slice(2, 10)}`, name: r.tool.name, input: r.tool.input }], usage: { input_tokens: 100, output_tokens: 10 } })
        : anthropicMessage({ text: r.text!, usage: { input_tokens: 200, output_tokens: 50 } });
    });
    const base = fake.origin;
    const models = ['claude-a', 'claude-b', 'claude-c'];
    const run = await runFull(
      { candidates: models.map((m) => `anthropic:${m}@${base}`), evaluator: `anthropic:claude-judge@${base}`, merger: `anthropic:claude-writer@${base}` },
      { ANTHROPIC_API_KEY: SENTINEL },
    );
    expect(run.status.state, JSON.stringify(run.status.error)).toBe('completed');
    expect(run.result.answer.text).toContain('src/lexer/tokenizer.js');
    const bodies = fake.bodies() as any[];
    // Tool results went back as tool_result blocks answering the tool_use ids.
    const withResults = bodies.filter((b) => hasToolResult(b));
    expect(withResults.length).toBe(3);
    for (const r of fake.requests) expect(r.headers['x-api-key']).toBe(SENTINEL);
    assertBlindEvaluator(fake.requests, [...models, 'claude-judge', 'claude-writer']);
    assertNoSentinel(run);
  });
});
